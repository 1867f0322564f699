#!/usr/bin/env python3
"""Markdown tables from one device call of bench/gemm/device_run.sh.

Usage: report.py OUT_DIR [COMMIT]  — reads headline.json, headline2.json (optional), peer.json and
sweep.json (optional) from OUT_DIR and prints the tables that bench/results/h100/gemm-skeleton.md holds.
"""
import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    out = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "?"
    runs = [r for r in (load(os.path.join(out, "headline.json")), load(os.path.join(out, "headline2.json"))) if r]
    peers = load(os.path.join(out, "peer.json"))
    sweep = load(os.path.join(out, "sweep.json"))
    device = runs[0]["device"] if runs else (peers or {}).get("device", "?")
    date = runs[0]["date"] if runs else "?"
    print(f"Device: {device}; date {date}; commit {commit}; torch {(peers or {}).get('torch', '?')}.\n")
    best_peer = {}
    if peers:
        for p in peers["peers"]:
            d = p["dtype"]
            if d not in best_peer or p["ms"] < best_peer[d]["ms"]:
                best_peer[d] = p
    print("## 8192³ (CUDA events around CUDA-graph replays, median; peers in the same call)\n")
    print("| kernel | dtype | run | ms | TFLOP/s | ratio to peer (peer time / ours) |")
    print("|---|---|---|---|---|---|")
    if peers:
        for p in peers["peers"]:
            print(f"| {p['name']} | {p['dtype']} | peer | {p['ms']:.4f} | {p['tflops']:.1f} | 1.00 |")
    for i, run in enumerate(runs):
        for r in run["results"]:
            peer = best_peer.get(r["dtype"])
            ratio = f"{peer['ms'] / r['ms']:.3f}" if peer else "–"
            c = r["config"]
            name = (f"solder {c['bm']}x{c['bn']}x{c['bk']} s{c['stages']}" + (" c2" if c.get("cluster_m", 1) > 1 else "") +
                    (f" persistent ({c['blocks']} blocks)" if c.get("blocks", 0) <= 264 else " block per tile"))
            print(f"| {name} | {r['dtype']} | {i + 1} | {r['ms']:.4f} | {r['tflops']:.1f} | {ratio} |")
    if sweep:
        print(f"\n## Sweep ({len(sweep['results'])} pairs; bf16, K-major, persistent, bf16 output)\n")
        print("| M | N | K | config | ms | TFLOP/s | best for shape |")
        print("|---|---|---|---|---|---|---|")
        best = {}
        for r in sweep["results"]:
            key = (r["m"], r["n"], r["k"])
            if key not in best or r["ms"] < best[key]["ms"]:
                best[key] = r
        for r in sweep["results"]:
            c = r["config"]
            key = (r["m"], r["n"], r["k"])
            name = f"{c['bm']}x{c['bn']}x{c['bk']} s{c['stages']}" + (" c2" if c.get("cluster_m", 1) > 1 else "")
            print(f"| {r['m']} | {r['n']} | {r['k']} | {name} | {r['ms']:.4f} | {r['tflops']:.1f} | {'**best**' if best[key] is r else ''} |")


if __name__ == "__main__":
    main()
