#!/usr/bin/env python3
"""The fp8 GEMM peers at quant_gemm's Q2-Q4 shapes (issue 15, ninth session, branch gemm-deep):
torch._scaled_mm alone (row-wise scale_a, bf16 out; the GEMM torch.compile's quant_gemm calls) timed
as bench/gemm_epilogue_peers.py does (CUDA-graph replays, median), and the kernels torch.profiler sees in
one call of _scaled_mm alone and of torch.compile's whole quant_gemm (bench/peers.py's function): name,
count, median µs. So the skeleton's tile at these shapes can be compared with what the peer launches.

    python3 bench/gemm_deep_peers.py [--cases Q2,Q3,Q4] [--out FILE.jsonl]
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.join(os.getcwd(), "bench")]  # carried copies too
from prologue_fast3_peers import COPIES, quantise, time_us  # noqa: E402

SHAPES = {"Q1": (4096, 1536, 2560), "Q2": (4096, 2560, 1536), "Q3": (4096, 3584, 8192), "Q4": (4096, 8192, 3584),
          "Q5": (4096, 7168, 2048)}  # M, N, K: bench/suites.py QUANT


def kernels(fn, args, calls=3):
    """(name, count, median µs) of the GPU kernels in `calls` calls of fn(*args) under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*args)
            torch.cuda.synchronize()
    times = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            times.setdefault(e.name, []).append(e.device_time)
    return [(name, len(t) // calls, statistics.median(t)) for name, t in sorted(times.items(), key=lambda kv: -statistics.median(kv[1]))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="Q2,Q3,Q4")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(2026)
    rows = []
    for case in args.cases.split(","):
        M, N, K = SHAPES[case]
        a = [torch.randn(M, K, generator=gen, device=dev).to(torch.bfloat16) for _ in range(COPIES)]
        w8 = [(torch.randn(N, K, generator=gen, device=dev) * 0.5).to(torch.float8_e4m3fn) for _ in range(COPIES)]
        aq = [quantise(x) for x in a]
        ones = torch.ones(1, N, device=dev, dtype=torch.float32)
        gemm = lambda q, s, w: torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ones, out_dtype=torch.bfloat16)
        us = time_us(gemm, [(q, s, w) for (q, s), w in zip(aq, w8)])
        tflops = 2.0 * M * N * K / (us * 1e-6) / 1e12
        print(f"  peer {case:4s} _scaled_mm alone {us:9.2f} us  {tflops:7.1f} TFLOP/s  (M {M} N {N} K {K})", flush=True)
        row = {"case": case, "m": M, "n": N, "k": K, "scaled_mm_us": us, "scaled_mm_tflops": tflops}
        q, s = aq[0]
        row["scaled_mm_kernels"] = kernels(gemm, (q, s, w8[0]))
        whole = torch.compile(lambda x, w: gemm(*quantise(x), w))
        row["compile_kernels"] = kernels(whole, (a[0], w8[0]))
        for part in ("scaled_mm_kernels", "compile_kernels"):
            for name, count, t in row[part]:
                print(f"    {case} {part[:-8]:9s} {t:9.2f} us x{count}  {name[:150]}", flush=True)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
