#!/usr/bin/env python3
"""The census's timed cells (issue 15, twentieth session) in PyTorch: each cell is a census program
(tests/census/NAME.sol) at a larger size, written as a user would (torch.matmul for the broadcast
product, F.linear for x @ w.T, torch.einsum for the others), timed eager
and under torch.compile (default mode), each in a CUDA graph (bench/common/graph_timing.py), each output
checked against float64 on the GPU. One JSON line per (cell, peer).

  peers.py --dims CELL        print the cell's program path and `--dim` arguments for solder (no torch needed)
  peers.py --list             print the cells' names
  peers.py [--cells A,B] [--out FILE]
  --set opcopy                the twenty-first session's cells (other-dtype operands, GQA) instead of the census's
  --set gather                the twenty-second session's cells (embedding then linear, selected weight rows at an
                              LLM-like size: bench/gather_copy/*.sol)
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


# opcopy's cells (twenty-first session): the products conversion copies move (contract/operand_copy_fit.h)
# and the GQA products (contract/grouped_axes.h), at a paper-like size, written as a user would:
# name: (census program, dims, inputs (name, shape as dim names, dtype), what the user writes, the float64
# reference of the program's meaning: each operand rounded to T as the contract rounds it).
def _opcopy_cells():
    import_torch = lambda: __import__("torch")

    def linear_of(w_dtype):
        def user(x, w):
            torch = import_torch()
            return torch.nn.functional.linear(x, w.to(x.dtype))
        def ref(x, w):
            return x.double() @ w.to(x.dtype).double().T
        return user, ref

    def scaled_mm_nn(a, b):
        torch = import_torch()
        one = torch.ones((), device=a.device, dtype=torch.float32)
        # _scaled_mm reads B column-major: the user transposes b [K, N] (a copy) first
        return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    def chain(a, b, d):
        return (a @ b) @ d  # bf16: h rounded to bf16 before the second product, as the contract rounds it

    def gqa_scores(q, k):
        g = q.shape[1] // k.shape[1]
        return q @ k.repeat_interleave(g, dim=1).transpose(-1, -2)

    def gqa_pv(p, v):
        g = p.shape[1] // v.shape[1]
        return p @ v.repeat_interleave(g, dim=1)

    def promoted(a, b):
        torch = import_torch()
        return (a.float() @ b.float()).to(torch.bfloat16)  # torch multiplies no bf16 by f16: the user promotes

    sq = {"M": 4096, "N": 4096, "K": 4096}
    gqa = {"B": 2, "H": 32, "HKV": 8, "S": 1024, "D": 128}
    return {
        "mixed_bf16_f32w": ("mixed_bf16_f32w", sq, [("x", ("M", "K"), "bfloat16"), ("w", ("N", "K"), "float32")], *linear_of("float32")),
        "mm_e4m3_nn": ("mm_e4m3_nn", sq, [("a", ("M", "K"), "float8_e4m3fn"), ("b", ("K", "N"), "float8_e4m3fn")], scaled_mm_nn,
                       lambda a, b: a.double() @ b.double()),
        "bmm_gqa": ("bmm_gqa", gqa, [("q", ("B", "H", "S", "D"), "bfloat16"), ("k", ("B", "HKV", "S", "D"), "bfloat16")], gqa_scores,
                    lambda q, k: gqa_scores(q.double(), k.double())),
        "chain_f32_mid": ("chain_f32_mid", dict(sq, L=4096), [("a", ("M", "K"), "bfloat16"), ("b", ("K", "N"), "bfloat16"), ("d", ("N", "L"), "bfloat16")],
                          chain, lambda a, b, d: (a.double() @ b.double()).to(a.dtype).double() @ d.double()),
        "mixed_f16_e4m3w": ("mixed_f16_e4m3w", sq, [("x", ("M", "K"), "float16"), ("w", ("N", "K"), "float8_e4m3fn")], *linear_of("e4m3")),
        "mixed_cast_bf16": ("mixed_cast_bf16", sq, [("x", ("M", "K"), "bfloat16"), ("w", ("N", "K"), "float32")], *linear_of("float32")),
        # opcopy2 (twenty-second session): bf16 x f16, promoted to f32 by the user: SGEMM by default, and cuBLAS's
        # tf32 (torch.backends.cuda.matmul.allow_tf32, exact here: both dtypes' values are tf32 values) in "_tf32"
        "mixed_bf16_f16": ("mixed_bf16_f16", sq, [("a", ("M", "K"), "bfloat16"), ("b", ("K", "N"), "float16")], promoted,
                           lambda a, b: a.double() @ b.double()),
        "mixed_bf16_f16_tf32": ("mixed_bf16_f16", sq, [("a", ("M", "K"), "bfloat16"), ("b", ("K", "N"), "float16")], promoted,
                                lambda a, b: a.double() @ b.double()),
        "bmm_gqa_pv": ("bmm_gqa_pv", gqa, [("p", ("B", "H", "S", "S"), "bfloat16"), ("v", ("B", "HKV", "S", "D"), "bfloat16")], gqa_pv,
                       lambda p, v: gqa_pv(p.double(), v.double())),
    }


OPCOPY_CELLS = _opcopy_cells()
OPCOPY_FLOPS = {name: 2 * 4096 ** 3 for name in ("mixed_bf16_f32w", "mixed_cast_bf16", "mixed_f16_e4m3w", "mm_e4m3_nn", "mixed_bf16_f16",
                                                  "mixed_bf16_f16_tf32")}
OPCOPY_FLOPS["chain_f32_mid"] = 2 * 2 * 4096 ** 3
OPCOPY_FLOPS["bmm_gqa"] = OPCOPY_FLOPS["bmm_gqa_pv"] = 2 * 2 * 32 * 1024 * 1024 * 128


def time_peers(cell, user, sets, ref, peers, cell_flops, out, **fields):
    """Each peer of `peers` (eager: `user` as written; compile: torch.compile of it) on the input sets `sets`:
    its first call, its error against the float64 `ref` over sets[0], the median of CUDA-graph replays; one JSON
    record per peer into `out` with `fields` (program, dims, ...). A peer whose call raises gets an error record."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from graph_timing import median_us
    for peer in peers.split(","):
        fn = user if peer == "eager" else torch.compile(user)
        t0 = time.time()
        try:
            y = fn(*sets[0])
            torch.cuda.synchronize()
        except Exception as e:  # a peer that cannot express it says so
            print(json.dumps({"cell": cell, "peer": peer, "error": str(e)[:300]}), file=out, flush=True)
            continue
        first_s = time.time() - t0
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        us = median_us(fn, sets, calls=20, replays=15)
        rec = {"cell": cell, **fields, "peer": peer, "median_us": us, "tflops": cell_flops / us / 1e6, "max_rel_err": err,
               "first_call_s": first_s, "device": torch.cuda.get_device_name(), "torch": torch.__version__}
        print(json.dumps(rec), file=out, flush=True)


def opcopy_main(args):
    import torch
    out = open(args.out, "a") if args.out else sys.stdout
    torch.manual_seed(1)
    cells = args.cells.split(",") if args.cells != ",".join(CELLS) else list(OPCOPY_CELLS)
    for cell in cells:
        prog, dims, inputs, user, ref_fn = OPCOPY_CELLS[cell]
        torch.backends.cuda.matmul.allow_tf32 = cell.endswith("_tf32")
        def make():
            ts = []
            for _, shape, dt in inputs:
                t = torch.randn(*[dims[d] for d in shape], device="cuda")
                if dt.startswith("float8"):
                    t = (t * 4).to(getattr(torch, dt))  # e4m3 values spread over its range
                else:
                    t = t.to(getattr(torch, dt))
                ts.append(t)
            return ts
        sets = [make(), make()]
        time_peers(cell, user, sets, ref_fn(*sets[0]), args.peers, OPCOPY_FLOPS[cell], out, program=prog, dims=dims,
                   allow_tf32=torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 0


# gather-copy's cells (twenty-second session): the census's gathers at an LLM-like size, token / row ids
# drawn over the whole table, written as a user would (F.embedding then F.linear; F.linear(x, w[idx])):
# name: (program, dims, FLOPs).
GATHER_CELLS = {
    "embed_llm": ("bench/gather_copy/embed_llm", {"T": 4096, "V": 32000, "C": 4096, "N": 4096}, 2 * 4096 ** 3),
    "gather_rows_llm": ("bench/gather_copy/gather_rows_llm", {"M": 4096, "N": 11008, "K": 4096, "V": 32000}, 2 * 4096 * 11008 * 4096),
}


def gather_main(args):
    import torch
    import torch.nn.functional as F
    out = open(args.out, "a") if args.out else sys.stdout
    torch.manual_seed(1)
    cells = args.cells.split(",") if args.cells != ",".join(CELLS) else list(GATHER_CELLS)
    for cell in cells:
        prog, d, cell_flops = GATHER_CELLS[cell]
        bf = dict(device="cuda", dtype=torch.bfloat16)
        if cell == "embed_llm":
            make = lambda: [torch.randint(0, d["V"], (d["T"],), device="cuda"), torch.randn(d["V"], d["C"], **bf), torch.randn(d["N"], d["C"], **bf)]
            user = lambda tok, emb, w: F.linear(F.embedding(tok, emb), w)
            ref_fn = lambda tok, emb, w: emb[tok].double() @ w.double().T
        else:
            make = lambda: [torch.randn(d["M"], d["K"], **bf), torch.randint(0, d["V"], (d["N"],), device="cuda"), torch.randn(d["V"], d["K"], **bf)]
            user = lambda a, idx, w: F.linear(a, w[idx])
            ref_fn = lambda a, idx, w: a.double() @ w[idx].double().T
        sets = [make(), make()]
        time_peers(cell, user, sets, ref_fn(*sets[0]), args.peers, cell_flops, out, program=prog, dims=d)
    return 0


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
    ap.add_argument("--set", default="census", choices=["census", "opcopy", "gather"])
    args = ap.parse_args()
    table = {"opcopy": OPCOPY_CELLS, "gather": GATHER_CELLS}.get(args.set, CELLS)
    if args.list:
        print("\n".join(table))
        return 0
    if args.dims:
        prog, dims = table[args.dims][0], table[args.dims][1]
        print(program_path(prog) + " " + " ".join(f"--dim {k}={v}" for k, v in dims.items()))
        return 0
    if args.set == "opcopy":
        return opcopy_main(args)
    if args.set == "gather":
        return gather_main(args)
    import torch
    out = open(args.out, "a") if args.out else sys.stdout
    torch.manual_seed(1)
    for cell in args.cells.split(","):
        prog, dims, eq, shapes = CELLS[cell]
        if eq is None:
            continue
        make = lambda: [torch.randn(*[dims[d] for d in s], device="cuda", dtype=torch.bfloat16) for s in shapes]
        sets = [make(), make()]
        ref = torch.einsum(eq, *[t.double() for t in sets[0]])
        # what a user writes: torch.matmul for the broadcast product, F.linear for x @ w.T, einsum else
        user = {"bmm_broadcast_left": torch.matmul, "mm_bf16_nn": torch.matmul,
                "mm_bf16_nt": torch.nn.functional.linear}.get(cell, lambda *t: torch.einsum(eq, *t))
        time_peers(cell, user, sets, ref, args.peers, flops(cell), out, program=prog, dims=dims, einsum=eq,
                   call=getattr(user, "__name__", "einsum"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
