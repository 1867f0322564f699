#!/usr/bin/env python3
"""The summary table of bench/attention/alibi_call.sh: alibi's schedules (new = the default: one FFMA per
score and vanilla's short-row schedule at S 1k; old = SOLDER_ATTN_AFFINE=two SOLDER_ATTN_SHORT=old, the
previous kernel; c2 = SOLDER_ATTN_CONSUMERS=2 on long rows; each the median of its rounds) against
FlexAttention per cell (median µs of the same call).

    alibi_table.py SOLDER_JSONL PEERS_JSONL
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import read_jsonl  # noqa: E402

MODES = ["new", "old", "c2"]


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
    flex = {p["case"]: p["median_us"] for p in peers
            if p.get("status") == "ok" and "median_us" in p and p.get("peer") == "flex"}

    def fmt(xs):
        return "—" if not xs else " / ".join(f"{x:.1f}" for x in xs)

    def med(xs):
        return statistics.median(xs) if xs else None

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.3f}"

    print("| cell | " + " | ".join(f"{m} µs" for m in MODES) + " | new/old | Flex µs | new/Flex | old/Flex |")
    print("|---|" + "---|" * (len(MODES) + 4))
    for case in order:
        t = times[case]
        new, old, f = med(t.get("new")), med(t.get("old")), flex.get(case)
        print(f"| {case} | " + " | ".join(fmt(t.get(m)) for m in MODES) +
              f" | {ratio(new, old)} | {'—' if f is None else f'{f:.1f}'} | {ratio(new, f)} | {ratio(old, f)} |")


if __name__ == "__main__":
    main()
