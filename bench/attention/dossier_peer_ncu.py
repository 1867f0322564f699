#!/usr/bin/env python3
"""One profiled call of a peer's kernels per cell, for ncu with `--profile-from-start off`.

    ncu --profile-from-start off ... python3 bench/attention/dossier_peer_ncu.py \
        --cells vanilla-d64-s1024:sdpa_cudnn,document_mask-d64-s4096:flex [--deadline EPOCH_S]

Each cell's peer is built exactly as bench/peers.py builds it (its inputs, its Impl, torch.compile in the
given mode for the compiled peers, FlexAttention's block mask outside the profiled region), called three
times to compile, autotune and warm up, then called once between cudaProfilerStart and cudaProfilerStop:
ncu sees only that call's kernels. A cell whose peer would not finish before --deadline (epoch seconds;
--flex-seconds for a compiled peer, 3 s for the others) is skipped and said so. One line per cell on
stdout: the cell, the peer, the compile mode and the wall seconds of its warm-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import suites  # noqa: E402
import peers  # noqa: E402  (imports torch; sets TORCHINDUCTOR_CACHE_DIR as the timing runs do)

import torch  # noqa: E402
import torch.cuda.profiler  # noqa: E402,F401  (cudaProfilerStart / Stop)


def parse_cells(text):
    out = []
    for item in text.split(","):
        case_id, _, peer = item.strip().partition(":")
        if case_id not in suites.CASES_BY_ID:
            raise SystemExit(f"dossier_peer_ncu: unknown case {case_id}")
        out.append((suites.CASES_BY_ID[case_id], peer or "sdpa_cudnn"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", required=True, help="comma-separated CASE:PEER (peers of bench/peers.py)")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                    help="torch.compile mode of the compiled peers (peers.py's default on the GPU)")
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds: start no cell that would end later")
    ap.add_argument("--flex-seconds", type=float, default=20.0, help="what one compiled peer's warm-up may take")
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    for case, peer in parse_cells(a.cells):
        d = case.dims()
        impl = peers.build_impl(case, peer, d, dev)
        need = a.flex_seconds if (impl.compiled or peer == "compile") else 3.0
        if a.deadline is not None and time.time() + need > a.deadline:
            print(f"skip {case.id} {peer}: {a.deadline - time.time():.0f} s left, needs {need:.0f}", flush=True)
            continue
        t0 = time.time()
        fn = impl.fn
        mode = "-"
        if impl.compiled or peer == "compile":
            mode = a.compile_mode
            fn = torch.compile(fn, mode=None if mode == "default" else mode, dynamic=False)
        gen = torch.Generator(device=dev).manual_seed(1)
        args = impl.make_args(peers.make_inputs(case, d, dev, gen))
        with torch.no_grad():
            for _ in range(3):
                fn(*args)
            torch.cuda.synchronize()
            warm = time.time() - t0
            torch.cuda.profiler.start()        # cudaProfilerStart: ncu profiles from here
            fn(*args)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        print(f"profiled {case.id} {peer} mode {mode} warm-up {warm:.1f} s", flush=True)
        del fn, args
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
