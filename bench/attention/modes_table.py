#!/usr/bin/env python3
"""The summary table of an attention device call that times Solder's schedules ("modes") interleaved
against one peer: each mode's rounds (the records' "mode", default "new"), new/old as the median of their
rounds, and the peer's median µs from the same call.

    modes_table.py SOLDER_JSONL PEERS_JSONL [--modes new,old,dyn] [--peer sdpa_cudnn]

Used by chain_call.sh (modes new / old / dyn = the default, SOLDER_ATTN_DYNAMIC=0 / =1, against cuDNN SDPA)
and alibi_call.sh (new / old / c2 = the default, the previous kernel, SOLDER_ATTN_CONSUMERS=2, against
FlexAttention).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import read_jsonl  # noqa: E402

PEER_LABELS = {"sdpa_cudnn": "cuDNN", "flex": "Flex"}


def read(path):
    try:
        return read_jsonl(path)
    except OSError:
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("solder")
    ap.add_argument("peers")
    ap.add_argument("--modes", default="new,old,dyn", help="the modes' columns, in order")
    ap.add_argument("--peer", default="sdpa_cudnn", help="the peer of bench/peers.py to compare with")
    opt = ap.parse_args()
    modes = opt.modes.split(",")
    label = PEER_LABELS.get(opt.peer, opt.peer)
    solder, peers = read(opt.solder), read(opt.peers)
    times, order = {}, []  # case -> mode -> [µs per round]
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            order.append(r["case"])
        if "median_us" in res:
            times[r["case"]].setdefault(r.get("mode", "new"), []).append(res["median_us"])
    peer = {p["case"]: p["median_us"] for p in peers
            if p.get("status") == "ok" and "median_us" in p and p.get("peer") == opt.peer}

    def fmt(xs):
        return "—" if not xs else " / ".join(f"{x:.1f}" for x in xs)

    def med(xs):
        return statistics.median(xs) if xs else None

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.3f}"

    print("| cell | " + " | ".join(f"{m} µs" for m in modes) +
          f" | new/old | {label} µs | new/{label} | old/{label} |")
    print("|---|" + "---|" * (len(modes) + 4))
    for case in order:
        t = times[case]
        new, old, c = med(t.get("new")), med(t.get("old")), peer.get(case)
        print(f"| {case} | " + " | ".join(fmt(t.get(m)) for m in modes) +
              f" | {ratio(new, old)} | {'—' if c is None else f'{c:.1f}'} | {ratio(new, c)} | {ratio(old, c)} |")


if __name__ == "__main__":
    main()
