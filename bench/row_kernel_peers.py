#!/usr/bin/env python3
"""The peer of quant_gemm's and rmsnorm_gemm's row kernels (issue 15, seventh session; bench/NOTES.md
"the row kernel in registers"): torch.compile (default mode) of the quantisation (amax, scale, e4m3
cast) and of the RMSNorm (f32 statistics, bf16 xn) alone, at the suite's shapes, timed as
bench/prologue_fast3_peers.py times them (CUDA events around CUDA-graph replays of 64 calls cycling
over 4 input copies, median µs per call). Compared in the same call with `solder bench` of
bench/programs/quant_rows.sol and rmsnorm_rows.sol (the row kernels alone).

    python3 bench/row_kernel_peers.py [--cases Q5,Q1,L1] [--out FILE.jsonl] [--warm-only]

--warm-only compiles (one call per case, nothing timed), so that a later run finds Inductor's caches
warm (bench/row_kernel/device.sh starts it beside Solder's verification).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prologue_fast3_peers import COPIES, SHAPES, quantise, rmsnorm, time_us  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="Q5,Q1,L1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--warm-only", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2026)
    rows = []
    compiled_quantise, compiled_rmsnorm = torch.compile(quantise), torch.compile(rmsnorm)
    for case in args.cases.split(","):
        kind, M, N, K = SHAPES[case]
        if args.warm_only:
            if kind == "quant":
                compiled_quantise(torch.randn(M, K, device=dev).to(torch.bfloat16))
            else:
                compiled_rmsnorm(torch.randn(M, K, device=dev).to(torch.bfloat16), torch.ones(K, device=dev, dtype=torch.bfloat16))
            torch.cuda.synchronize()
            print(f"warm {case}", flush=True)
            continue
        if kind == "quant":
            a = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            us = time_us(compiled_quantise, [(x,) for x in a])
            part, moved = "quantise alone, compile", M * K * 3 + M * 4
        else:
            x = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
            g = (1 + 0.1 * torch.randn(K, generator=gen, device=dev)).to(torch.bfloat16)
            us = time_us(compiled_rmsnorm, [(t, g) for t in x])
            part, moved = "rmsnorm alone, compile", M * K * 4 + K * 2
        rows.append({"case": case, "part": part, "median_us": us, "bytes": moved})
        print(f"peer {case:3s} {part:26s} {us:8.2f} us  {moved / us / 1e3:6.0f} GB/s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
