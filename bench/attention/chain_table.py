#!/usr/bin/env python3
"""The summary table of bench/attention/chain_call.sh: Solder's schedules (new = the default, work tiles
claimed from a counter where the emitter takes it; old = SOLDER_ATTN_DYNAMIC=0, the snake's fixed rounds;
dyn = SOLDER_ATTN_DYNAMIC=1; each the median of its rounds) against cuDNN SDPA per cell (median µs of the
same call).

    chain_table.py SOLDER_JSONL PEERS_JSONL
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import read_jsonl  # noqa: E402

MODES = ["new", "old", "dyn"]


def read(path):
    try:
        return read_jsonl(path)
    except OSError:
        return []


def main():
    solder, peers = read(sys.argv[1]), read(sys.argv[2])
    times, order = {}, []  # case -> mode -> [µs per round]
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            order.append(r["case"])
        if "median_us" in res:
            times[r["case"]].setdefault(r.get("mode", "new"), []).append(res["median_us"])
    cudnn = {p["case"]: p["median_us"] for p in peers
             if p.get("status") == "ok" and "median_us" in p and p.get("peer") == "sdpa_cudnn"}

    def fmt(xs):
        return "—" if not xs else " / ".join(f"{x:.1f}" for x in xs)

    def med(xs):
        return statistics.median(xs) if xs else None

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.3f}"

    print("| cell | " + " | ".join(f"{m} µs" for m in MODES) + " | new/old | cuDNN µs | new/cuDNN | old/cuDNN |")
    print("|---|" + "---|" * (len(MODES) + 4))
    for case in order:
        t = times[case]
        new, old, c = med(t.get("new")), med(t.get("old")), cudnn.get(case)
        print(f"| {case} | " + " | ".join(fmt(t.get(m)) for m in MODES) +
              f" | {ratio(new, old)} | {'—' if c is None else f'{c:.1f}'} | {ratio(new, c)} | {ratio(old, c)} |")


if __name__ == "__main__":
    main()
