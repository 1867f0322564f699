#!/usr/bin/env python3
"""The peers' kernels of a gemm_chains case, one call at a time, for a per-kernel comparison with
Solder's (bench/NOTES.md, gemm-chains3): torch eager (cuBLAS) and torch.compile (default mode) of
the same computation as bench/peers.py (ffn: gelu(a@b, tanh) @ d; gated_ffn: (silu(a@b1) * a@b2) @ d,
fp16, weights ~ normal(0, 0.02)).

    python3 bench/peer_kernels.py ffn M N K L [--peers eager,compile] [--calls 3]

Each peer is warmed up (torch.compile compiles), then called `calls` times inside an NVTX range
"peer_kernels/<peer>" with a device synchronisation after each call. Run it under Nsight Compute with
`--nvtx --nvtx-include 'peer_kernels/'` to profile exactly those kernels (name, grid, block, time), as
bench/gemm_chains3.sh does for Solder's kernels with the same metrics. Without ncu it prints the
kernels torch.profiler saw in the same range (median µs, grid and block from its trace, name).
"""
import argparse
import json
import statistics
import tempfile

import torch
import torch.nn.functional as F


def make(workload, M, N, K, L, gen):
    def w(*shape):
        return (torch.randn(*shape, generator=gen, device="cuda") * 0.02).half()

    a = torch.randn(M, K, generator=gen, device="cuda").half()
    if workload == "ffn":
        return (a, w(K, N), w(N, L))
    return (a, w(K, N), w(K, N), w(N, L))


def ffn(a, b, d):
    return F.gelu(a @ b, approximate="tanh") @ d


def gated_ffn(a, b1, b2, d):
    return (F.silu(a @ b1) * (a @ b2)) @ d


def launch_shapes(prof):
    """Kernel name -> "grid [x, y, z] block [x, y, z]", from the profiler's Chrome trace (kineto records
    each kernel's launch shape there, not in prof.events()); empty where the trace cannot be read."""
    shapes = {}
    try:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            with open(f.name) as trace:
                events = json.load(trace).get("traceEvents", [])
        for e in events:
            args = e.get("args") or {}
            if e.get("cat") == "kernel" and "grid" in args:
                shapes.setdefault(e.get("name", ""), f"grid {args['grid']} block {args.get('block')}")
    except Exception:  # an older kineto, no trace: names and times only
        pass
    return shapes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=("ffn", "gated_ffn"))
    ap.add_argument("dims", type=int, nargs=4, metavar=("M", "N", "K", "L"))
    ap.add_argument("--peers", default="eager,compile")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--no-profiler", action="store_true", help="no torch.profiler (under ncu, which holds CUPTI)")
    opt = ap.parse_args()
    M, N, K, L = opt.dims
    gen = torch.Generator(device="cuda").manual_seed(0)
    fn = ffn if opt.workload == "ffn" else gated_ffn
    # Fresh inputs per call (cold L2 for weights over 50 MB, as the peers' rotation gives).
    sets = [make(opt.workload, M, N, K, L, gen) for _ in range(opt.calls)]
    for peer in opt.peers.split(","):
        f = fn if peer == "eager" else torch.compile(fn, mode="default")
        for s in sets:  # warm-up: compilation, cuBLAS plans
            f(*s)
        torch.cuda.synchronize()
        prof = None
        if not opt.no_profiler:
            try:
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
                prof.__enter__()
            except Exception:  # under ncu CUPTI may be taken
                prof = None
        torch.cuda.nvtx.range_push(f"peer_kernels/{peer}")
        for s in sets:
            f(*s)
            torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        if prof is not None:
            prof.__exit__(None, None, None)
            rows = {}
            for e in prof.events():
                if e.device_type != torch.autograd.DeviceType.CUDA:
                    continue
                rows.setdefault(e.name, []).append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
            grids = launch_shapes(prof)
            print(f"== {opt.workload} M{M} N{N} K{K} L{L} {peer}: kernels per call (torch.profiler, median µs)")
            for name, ts in rows.items():
                print(f"   {statistics.median(ts):8.2f} us  x{len(ts) // max(1, opt.calls)}  {grids.get(name, '')}  {name[:160]}")


if __name__ == "__main__":
    main()
