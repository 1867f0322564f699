#!/usr/bin/env python3
"""Markdown table of one bench/attention/device_run.sh call: python3 report.py DIR.

Reads DIR/solder{1,2}.json (bench_attention table), DIR/variant{1,2}.json (an A/B build, if any;
its configurations are suffixed with $VARIANT_LABEL) and DIR/peer{1,2}.json (peer.py). For every cell
(head dim, seq, causal): each Solder configuration's TFLOP/s in both runs, the best configuration
(lowest mean time), the peers' TFLOP/s in both runs, and Solder's time over cuDNN's (means of the
two runs; below 1.0 is faster than cuDNN).
"""
import json
import os
import sys
from collections import defaultdict


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    solder = [load(os.path.join(root, f"solder{i}.json")) for i in (1, 2)]
    peers = [load(os.path.join(root, f"peer{i}.json")) for i in (1, 2)]
    variant = [load(os.path.join(root, f"variant{i}.json")) for i in (1, 2)]
    label = os.environ.get("VARIANT_LABEL", "variant")
    ours = defaultdict(lambda: defaultdict(list))  # cell -> config -> [ms per run]
    for runs, suffix in ((solder, ""), (variant, f" ({label})")):
        for run in runs:
            for r in (run or {}).get("results", []):
                ours[(r["dim"], r["seq"], r["causal"])][r["config"] + suffix].append(r["ms"])
    theirs = defaultdict(lambda: defaultdict(list))
    for run in peers:
        for p in (run or {}).get("peers", []):
            theirs[(p["dim"], p["seq"], p["causal"])][p["name"]].append(p["ms"])
    if solder[0]:
        print(f"device: {solder[0]['device']}, Solder runs at {', '.join(s['date'] for s in solder if s)}")
    if peers[0]:
        print(f"peers: torch {peers[0].get('torch')}, cuDNN {peers[0].get('cudnn')}")
    print()
    print("| hd | seq | B×H | mask | Solder best config | Solder TFLOP/s (run 1 / 2) | other configs TFLOP/s | cuDNN TFLOP/s | FA2 (torch flash) TFLOP/s | Solder time / cuDNN |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cell in sorted(set(ours) | set(theirs)):
        dim, seq, causal = cell
        batch = 16384 // seq
        flops = 4.0 * batch * 16 * seq * seq * dim * (0.5 if causal else 1.0)
        tf = lambda ms: flops / ms / 1e9
        fmt = lambda times: " / ".join(f"{tf(t):.0f}" for t in times) if times else "—"
        mean = lambda times: sum(times) / len(times)
        configs = ours.get(cell, {})
        best = min(configs, key=lambda c: mean(configs[c])) if configs else None
        others = ", ".join(f"{c}: {fmt(t)}" for c, t in sorted(configs.items()) if c != best)
        cudnn = theirs.get(cell, {}).get("cudnn", [])
        flash = theirs.get(cell, {}).get("flash", [])
        ratio = f"{mean(configs[best]) / mean(cudnn):.2f}" if best and cudnn else "—"
        print(f"| {dim} | {seq} | {batch}×16 | {'causal' if causal else 'none'} | {best or '—'} | "
              f"{fmt(configs.get(best, []))} | {others or '—'} | {fmt(cudnn)} | {fmt(flash)} | {ratio} |")


if __name__ == "__main__":
    main()
