#!/usr/bin/env python3
"""The peers' parts of quant_gemm and rmsnorm_gemm, timed apart (issue 15, sixth session): what the
GEMM alone costs in cuBLAS / torch._scaled_mm, and what the quantisation (or RMSNorm) alone costs in
torch eager and torch.compile (default mode), at the suite's shapes. Compared in the same call with
Solder's plain skeleton alone (bench/programs/fp8_rowscale_gemm.sol, bf16_rowscale_gemm.sol) and
Solder's two-kernel plans (bench/prologue_fast3_device.sh).

    python3 bench/prologue_fast3_peers.py [--cases Q1,Q5,L1,L2] [--out FILE.jsonl]

Timing as bench/peers.py: CUDA events around CUDA-graph replays of many calls cycling over 4 input
copies, median of the replays, µs per call. Inputs random (never zeros). Prints one line per part.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from graph_timing import median_us  # noqa: E402

SHAPES = {  # M, N, K (quant) / T, N, HID (rmsnorm): bench/suites.py
    "Q1": ("quant", 4096, 1536, 2560),
    "Q5": ("quant", 4096, 7168, 2048),
    "L1": ("rms", 2048, 6144, 4096),
    "L2": ("rms", 4096, 14336, 4096),
}
COPIES = 4


def time_us(fn, inputs, calls=64, replays=12):
    """fn(*inputs[i % COPIES]) captured `calls` times in one graph; median µs per call."""
    return median_us(fn, inputs, calls=calls, replays=replays)


def quantise(a):
    amax = a.abs().amax(dim=-1, keepdim=True).to(torch.float32)
    scale = amax / 448.0
    return (a.to(torch.float32) / scale).to(torch.float8_e4m3fn), scale


def rmsnorm(x, g):
    xf = x.to(torch.float32)
    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) / xf.shape[-1] + 1e-5) * g.to(torch.float32)).to(torch.bfloat16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="Q1,Q5,L1,L2")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2026)
    rows = []

    def report(case, part, us, note):
        rows.append({"case": case, "part": part, "median_us": us, "note": note})
        print(f"  {case:3s} {part:28s} {us:9.2f} µs   {note}", flush=True)

    for case in args.cases.split(","):
        kind, M, N, K = SHAPES[case]
        if kind == "quant":
            a = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            w8 = [(torch.randn(N, K, generator=gen, device=dev) * 0.5).to(torch.float8_e4m3fn) for _ in range(COPIES)]
            aq = [quantise(x) for x in a]
            ones = torch.ones(1, N, device=dev, dtype=torch.float32)
            gemm = lambda q, s, w: torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ones, out_dtype=torch.bfloat16)
            report(case, "_scaled_mm alone", time_us(gemm, [(q, s, w) for (q, s), w in zip(aq, w8)]),
                   "e4m3 [M,K] x [N,K]^T, row-wise scale_a, bf16 out")
            report(case, "quantise alone, eager", time_us(quantise, [(x,) for x in a]), "amax, scale, cast to e4m3")
            compiled = torch.compile(quantise)
            report(case, "quantise alone, compile", time_us(compiled, [(x,) for x in a]), "torch.compile default mode")
            full = torch.compile(lambda x, w: gemm(*quantise(x), w))
            report(case, "whole, compile", time_us(full, list(zip(a, w8))), "torch.compile default mode (as peers.py)")
        else:
            x = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            g = (1 + 0.1 * torch.randn(K, generator=gen, device=dev)).to(torch.bfloat16)
            w = [(0.02 * torch.randn(K, N, generator=gen, device=dev)).to(torch.bfloat16) for _ in range(COPIES)]
            xn = [rmsnorm(t, g) for t in x]
            report(case, "bf16 matmul alone", time_us(torch.matmul, list(zip(xn, w))), "cuBLAS, xn [T,HID] @ w [HID,N]")
            compiled = torch.compile(rmsnorm)
            report(case, "rmsnorm alone, compile", time_us(compiled, [(t, g) for t in x]), "f32 statistics, bf16 xn")
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
