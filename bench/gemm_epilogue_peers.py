#!/usr/bin/env python3
"""The peers of the GEMM skeleton alone at the short-K shapes (issue 15, seventh session, branch
gemm-epilogue): torch._scaled_mm (row-wise scale, bf16 out) at Q1/Q5, cuBLAS bf16 matmul at L1/L2, and
one nerf_mlp layer (65536 x 256 x 256 f16, bias + ReLU) as cuBLAS addmm + relu (eager) and, with
--compile, torch.compile in its default mode.

    python3 bench/gemm_epilogue_peers.py [--cases Q1,Q5,L1,L2,layer] [--compile] [--out FILE.jsonl]
    python3 bench/gemm_epilogue_peers.py --once Q5     # one _scaled_mm call (for ncu -c 1)

Timing: bench/prologue_fast3_peers.py's time_us (CUDA events around CUDA-graph replays, median).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prologue_fast3_peers import COPIES, SHAPES, quantise, time_us  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="Q1,Q5,L1,L2,layer")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--once", default=None, help="one _scaled_mm call of this quant case, nothing timed")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2026)
    if args.once:
        _, M, N, K = SHAPES[args.once]
        q, s = quantise(torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16))
        w = (torch.randn(N, K, generator=gen, device=dev) * 0.5).to(torch.float8_e4m3fn)
        ones = torch.ones(1, N, device=dev, dtype=torch.float32)
        torch.cuda.synchronize()
        torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ones, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        return
    rows = []

    def report(case, part, us, note):
        rows.append({"case": case, "part": part, "median_us": us, "note": note})
        print(f"  peer {case:5s} {part:26s} {us:9.2f} us   {note}", flush=True)

    for case in args.cases.split(","):
        if case == "layer":
            N, H = 65536, 256
            h = [torch.randn(N, H, generator=gen, device=dev).to(torch.float16) for _ in range(COPIES)]
            w = (0.1 * torch.randn(H, H, generator=gen, device=dev)).to(torch.float16)
            b = (0.1 * torch.randn(H, generator=gen, device=dev)).to(torch.float16)
            layer = lambda x: torch.relu(torch.addmm(b, x, w))
            report(case, "addmm + relu, eager", time_us(layer, [(x,) for x in h]), "cuBLAS f16 with bias, then relu")
            if args.compile:
                report(case, "torch.compile default", time_us(torch.compile(layer), [(x,) for x in h]), "default mode")
            continue
        kind, M, N, K = SHAPES[case]
        if kind == "quant":
            a = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            w8 = [(torch.randn(N, K, generator=gen, device=dev) * 0.5).to(torch.float8_e4m3fn) for _ in range(COPIES)]
            aq = [quantise(x) for x in a]
            ones = torch.ones(1, N, device=dev, dtype=torch.float32)
            gemm = lambda q, s, w: torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ones, out_dtype=torch.bfloat16)
            report(case, "_scaled_mm alone", time_us(gemm, [(q, s, w) for (q, s), w in zip(aq, w8)]),
                   "e4m3 [M,K] x [N,K]^T, row-wise scale_a, bf16 out")
        else:
            xn = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            w = [(0.02 * torch.randn(K, N, generator=gen, device=dev)).to(torch.bfloat16) for _ in range(COPIES)]
            report(case, "bf16 matmul alone", time_us(torch.matmul, list(zip(xn, w))), "cuBLAS, xn [T,HID] @ w [HID,N]")
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
