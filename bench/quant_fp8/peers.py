#!/usr/bin/env python3
"""The fp8 GEMM peer at quant_gemm's shapes (issue 15, tenth session, branch quant-fp8): torch._scaled_mm
alone (row-wise scale_a, bf16 out: the GEMM torch.compile's quant_gemm calls), timed as
bench/prologue_fast3_peers.py does (CUDA-graph replays of 64 calls over 4 input copies, median), and with
--kernels the kernels torch.profiler sees in calls of _scaled_mm alone and of torch.compile's whole
quant_gemm (name, count, median µs): the tile and cluster cuBLAS launches at these shapes.

    python3 bench/quant_fp8/peers.py --time Q3,Q4,Q2 [--kernels Q3] [--out FILE.jsonl]
"""
import argparse
import json
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.dirname(here), os.path.join(os.getcwd(), "bench")]  # carried copies too
from gemm_deep_peers import kernels  # noqa: E402
from prologue_fast3_peers import COPIES, quantise, time_us  # noqa: E402

SHAPES = {"Q1": (4096, 1536, 2560), "Q2": (4096, 2560, 1536), "Q3": (4096, 3584, 8192), "Q4": (4096, 8192, 3584),
          "Q5": (4096, 7168, 2048), "Q6": (4096, 2048, 7168), "Q7": (4096, 2048, 768), "Q8": (4096, 768, 2048),
          "Q9": (4096, 4096, 1536), "Q10": (4096, 1536, 4096)}  # M, N, K: bench/suites.py QUANT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time", default="", help="cases whose _scaled_mm alone is timed")
    ap.add_argument("--kernels", default="", help="cases whose profiler kernel names are listed")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2026)
    out = open(args.out, "a") if args.out else None

    def operands(case):
        M, N, K = SHAPES[case]
        a = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
        w8 = [(torch.randn(N, K, generator=gen, device=dev) * 0.5).to(torch.float8_e4m3fn) for _ in range(COPIES)]
        ones = torch.ones(1, N, device=dev, dtype=torch.float32)
        gemm = lambda q, s, w: torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ones, out_dtype=torch.bfloat16)
        return M, N, K, a, w8, gemm

    for case in [c for c in args.time.split(",") if c]:
        M, N, K, a, w8, gemm = operands(case)
        aq = [quantise(x) for x in a]
        us = time_us(gemm, [(q, s, w) for (q, s), w in zip(aq, w8)])
        tflops = 2.0 * M * N * K / (us * 1e-6) / 1e12
        print(f"  peer {case:4s} _scaled_mm alone {us:9.2f} us  {tflops:7.1f} TFLOP/s  (M {M} N {N} K {K})", flush=True)
        if out:
            out.write(json.dumps({"case": case, "m": M, "n": N, "k": K, "scaled_mm_us": us, "scaled_mm_tflops": tflops}) + "\n")
            out.flush()
    for case in [c for c in args.kernels.split(",") if c]:
        M, N, K, a, w8, gemm = operands(case)
        row = {"case": case, "m": M, "n": N, "k": K}
        q, s = quantise(a[0])
        row["scaled_mm_kernels"] = kernels(gemm, (q, s, w8[0]))
        whole = torch.compile(lambda x, w: gemm(*quantise(x), w))
        row["compile_kernels"] = kernels(whole, (a[0], w8[0]))
        for part in ("scaled_mm_kernels", "compile_kernels"):
            for name, count, t in row[part]:
                print(f"    {case} {part[:-8]:9s} {t:9.2f} us x{count}  {name[:200]}", flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
