#!/usr/bin/env python3
"""The census's timed cells (issue 15, twentieth session) in PyTorch: each cell is a census program
(tests/census/NAME.sol) at a larger size, written as a user would (torch.matmul for the broadcast
product, F.linear for x @ w.T, torch.einsum for the others), timed eager
and under torch.compile (default mode), each in a CUDA graph (bench/common/graph_timing.py), each output
checked against float64 on the GPU. One JSON line per (cell, peer).

  peers.py --dims CELL        print the cell's program path and `--dim` arguments for solder (no torch needed)
  peers.py --list             print the cells' names
  peers.py [--cells A,B] [--out FILE]
"""
import argparse
import json
import os
import sys
import time

# name: (census program, dims, einsum of the operands in the program's order, operand shapes as dim names)
CELLS = {
    "two_axes_mkr": ("two_axes_mkr", {"M": 4096, "N": 4096, "K": 64, "R": 64}, "mkr,krn->mn", [("M", "K", "R"), ("K", "R", "N")]),
    "two_axes_batched": ("two_axes_batched", {"B": 8, "M": 2048, "N": 2048, "H": 16, "D": 64}, "bmhd,bnhd->bmn",
                         [("B", "M", "H", "D"), ("B", "N", "H", "D")]),
    "bmm_broadcast_left": ("bmm_broadcast_left", {"B": 16, "M": 1024, "N": 1024, "K": 1024}, "mk,bkn->bmn", [("M", "K"), ("B", "K", "N")]),
    "mm_bf16_nt": ("mm_bf16_nt", {"M": 4096, "N": 4096, "K": 4096}, "mk,nk->mn", [("M", "K"), ("N", "K")]),
    # nmajor (twenty-first session): the same product with B [K, N] (N-major), beside mm_bf16_nt's B [N, K]
    "mm_bf16_nn": ("mm_bf16_nn", {"M": 4096, "N": 4096, "K": 4096}, "mk,kn->mn", [("M", "K"), ("K", "N")]),
    # Solder only (main's binary against this one): the one example whose plan the batch rule moves at a
    # size outside the suites (a batch of two images: y2 leaves the gathered chain for the skeleton).
    "conv_chain_n2": ("examples/conv_chain", {"N": 2}, None, None),
}


def program_path(prog):
    return (prog if "/" in prog else "tests/census/" + prog) + ".sol"


def flops(cell):
    prog, dims, eq, shapes = CELLS[cell]
    letters = {}
    for names, sub in zip(shapes, eq.split("->")[0].split(",")):
        for n, l in zip(names, sub):
            letters[l] = dims[n]
    total = 2
    for v in letters.values():
        total *= v
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--out")
    ap.add_argument("--peers", default="eager,compile")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CELLS))
        return 0
    if args.dims:
        prog, dims, _, _ = CELLS[args.dims]
        print(program_path(prog) + " " + " ".join(f"--dim {k}={v}" for k, v in dims.items()))
        return 0
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from graph_timing import median_us
    out = open(args.out, "a") if args.out else sys.stdout
    torch.manual_seed(1)
    for cell in args.cells.split(","):
        prog, dims, eq, shapes = CELLS[cell]
        if eq is None:
            continue
        make = lambda: [torch.randn(*[dims[d] for d in s], device="cuda", dtype=torch.bfloat16) for s in shapes]
        sets = [make(), make()]
        ref = torch.einsum(eq, *[t.double() for t in sets[0]])
        for peer in args.peers.split(","):
            # what a user writes: torch.matmul for the broadcast product, F.linear for x @ w.T, einsum else
            user = {"bmm_broadcast_left": torch.matmul, "mm_bf16_nn": torch.matmul,
                    "mm_bf16_nt": torch.nn.functional.linear}.get(cell, lambda *t: torch.einsum(eq, *t))
            fn = user if peer == "eager" else torch.compile(user)
            t0 = time.time()
            y = fn(*sets[0])
            torch.cuda.synchronize()
            first_s = time.time() - t0
            err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            us = median_us(fn, sets, calls=20, replays=15)
            rec = {"cell": cell, "program": prog, "dims": dims, "einsum": eq, "peer": peer, "median_us": us,
                   "call": getattr(user, "__name__", "einsum"), "tflops": flops(cell) / us / 1e6, "max_rel_err": err, "first_call_s": first_s,
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}
            print(json.dumps(rec), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
