#!/usr/bin/env python3
"""The summary of bench/attention/long_call.sh and hd128_call.sh: per cell and mode the rounds' µs, the
median against the cell's `old` mode and against cuDNN SDPA from the same call, and the TFLOP/s of the
median (vanilla: 4·B·H·S²·D FLOP; causal: half the score area, 4·B·H·S²·D / 2).

    long_table.py SOLDER_JSONL PEERS_JSONL
"""
import json
import re
import statistics
import sys


def read(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def flops(case):
    m = re.match(r"(causal|vanilla)-d(\d+)-s(\d+)$", case)
    if not m:
        return None
    d, s = int(m.group(2)), int(m.group(3))
    tokens = 16 * 1024  # the suite: B·S = 16k tokens, 16 heads
    return 4 * (tokens // s) * 16 * s * s * d / (2 if m.group(1) == "causal" else 1)


def main():
    solder, peers = read(sys.argv[1]), read(sys.argv[2])
    times, order = {}, []
    for r in solder:
        res = r.get("result") or {}
        key = (r["case"], r["mode"])
        if key not in times:
            times[key] = []
            order.append(key)
        if "median_us" in res:
            times[key].append(res["median_us"])
    cudnn = {p["case"]: p["median_us"] for p in peers
             if p.get("status") == "ok" and "median_us" in p and p.get("peer") == "sdpa_cudnn"}
    print("| cell | mode | rounds µs | median | /old | cuDNN µs | /cuDNN | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for case, mode in sorted(order, key=lambda k: (k[0], k[1] != "old", k[1])):
        xs = times[(case, mode)]
        med = statistics.median(xs) if xs else None
        old = times.get((case, "old"))
        old_med = statistics.median(old) if old else None
        c = cudnn.get(case)
        f = flops(case)
        cells = [case, mode, " / ".join(f"{x:.1f}" for x in xs) or "—",
                 "—" if med is None else f"{med:.1f}",
                 "—" if med is None or old_med is None else f"{med / old_med:.3f}",
                 "—" if c is None else f"{c:.1f}",
                 "—" if med is None or c is None else f"{med / c:.3f}",
                 "—" if med is None or f is None else f"{f / med / 1e6:.0f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
