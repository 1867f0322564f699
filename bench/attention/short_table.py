#!/usr/bin/env python3
"""The summary table of bench/attention/short_call.sh: Solder's schedules against cuDNN SDPA and
FlexAttention per cell (median µs of the same call).

    short_table.py SOLDER_JSONL PEERS_JSONL
"""
import json
import sys


def read(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except OSError:
        pass
    return rows


def main():
    solder, peers = read(sys.argv[1]), read(sys.argv[2])
    times = {}  # case -> mode -> µs
    order = []
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            order.append(r["case"])
        if "median_us" in res:
            times[r["case"]][r.get("mode", "new")] = res["median_us"]
    peer = {}  # case -> peer -> µs
    for p in peers:
        if p.get("status") == "ok" and "median_us" in p:
            peer.setdefault(p["case"], {})[p["peer"]] = p["median_us"]

    def fmt(x):
        return "—" if x is None else f"{x:.1f}"

    def ratio(a, b):
        return "—" if a is None or b is None else f"{a / b:.2f}"

    print("| cell | new µs | q1 µs | old µs | all µs | new/old | cuDNN µs | new/cuDNN | old/cuDNN | Flex µs | new/Flex |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in order:
        t = times[case]
        new, q1, old, every = t.get("new"), t.get("q1"), t.get("old"), t.get("all")
        cudnn = peer.get(case, {}).get("sdpa_cudnn")
        flex = peer.get(case, {}).get("flex")
        print(f"| {case} | {fmt(new)} | {fmt(q1)} | {fmt(old)} | {fmt(every)} | {ratio(new, old)} | {fmt(cudnn)} | {ratio(new, cudnn)} | "
              f"{ratio(old, cudnn)} | {fmt(flex)} | {ratio(new, flex)} |")


if __name__ == "__main__":
    main()
