#!/usr/bin/env python3
"""FlexAttention's block-mask build for the document_mask cells, timed on its own.

bench/peers.py times FlexAttention with its block mask built once outside the timed region (a model
builds it once per batch). Solder's document_mask kernel classifies the key tiles from the ids inside
its one kernel, so the fair total for one new batch of document ids is Flex's kernel plus this build.

    python3 bench/attention/flex_docmask_build.py [--cases REGEX] [--reps N] [--out FILE.jsonl]

Per case: create_block_mask(doc[b, q] == doc[b, kv], B, None, S, S) on the case's own inputs (the .sol's
distributions, bench/peers.py's make_inputs), synchronised, median / min of N builds after 2 warm-ups.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

# bench/ (peers.py, suites.py): beside this script's folder, or under the working directory (repo root)
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import peers  # noqa: E402
import suites  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=r"^document_mask-")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="")
    opt = ap.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)
    out = open(opt.out, "a") if opt.out else None
    for case in suites.ALL_CASES:
        if case.suite != "attention" or not re.search(opt.cases, case.id):
            continue
        d = case.dims(False)
        x = peers.make_inputs(case, d, dev, gen)
        doc = x["doc"]
        B, S = d["B"], d["S"]

        def build():
            return create_block_mask(lambda b, h, qi, kv: doc[b, qi] == doc[b, kv], B, None, S, S, device="cuda")

        times = []
        for rep in range(opt.reps + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            build()
            torch.cuda.synchronize()
            if rep >= 2:
                times.append((time.perf_counter() - t0) * 1e6)
        rec = {"case": case.id, "peer": "flex_block_mask_build", "median_us": statistics.median(times),
               "min_us": min(times), "reps": len(times)}
        print(f"{case.id}: Flex create_block_mask {rec['median_us']:.1f} us median (min {rec['min_us']:.1f}) over {len(times)}", flush=True)
        if out:
            out.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
