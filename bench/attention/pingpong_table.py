#!/usr/bin/env python3
"""The summary table of bench/attention/pingpong_call.sh: Solder's schedules (new = staggered consumers,
old = the previous Config, l1 / l3 = Stagger 1 / 3, o6 = no stagger on 6 stages; each the median of its
rounds' medians) against cuDNN SDPA per cell (median µs of the same call).

    pingpong_table.py SOLDER_JSONL PEERS_JSONL
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import read_jsonl  # noqa: E402

MODES = ["new", "old", "l1", "o6", "l3"]


def read(path):
    try:
        return read_jsonl(path)
    except OSError:
        return []


def main():
    solder, peers = read(sys.argv[1]), read(sys.argv[2])
    times = {}  # case -> mode -> [µs per round]
    order = []
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            order.append(r["case"])
        if "median_us" in res:
            times[r["case"]].setdefault(r.get("mode", "new"), []).append(res["median_us"])
    cudnn = {}
    for p in peers:
        if p.get("status") == "ok" and "median_us" in p and p.get("peer") == "sdpa_cudnn":
            cudnn[p["case"]] = p["median_us"]

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
