#!/usr/bin/env python3
"""Markdown tables from one device_splitk.sh call: report_splitk.py DIR (splitk1.json, splitk2.json, peer.json,
*.bench.log). Per shape: cuBLAS (B K- and N-major), then each skeleton configuration with its two runs and
cuBLAS B:K time / ours (above 1: ours is faster)."""
import glob
import json
import os
import re
import sys


def main():
    d = sys.argv[1]
    runs = [json.load(open(os.path.join(d, f)))["results"] for f in ("splitk1.json", "splitk2.json")]
    peers = json.load(open(os.path.join(d, "peer.json")))["peers"]
    shapes = []
    for r in runs[0]:
        key = (r["m"], r["n"], r["k"])
        if key not in shapes:
            shapes.append(key)
    for m, n, k in shapes:
        print(f"\n**M {m}, N {n}, K {k}** (f16, A and B K-major, bf16 out)\n")
        print("| kernel | ms (run 1) | ms (run 2) | TFLOP/s | cuBLAS B:K / ours |")
        print("|---|---|---|---|---|")
        base = None
        for p in peers:
            if (p["m"], p["n"], p["k"]) == (m, n, k):
                print(f"| {p['name']} | {p['ms']:.4f} | | {p['tflops']:.1f} | |")
                if "B:K" in p["name"]:
                    base = p["ms"]
        for a, b in zip(runs[0], runs[1]):
            if (a["m"], a["n"], a["k"]) != (m, n, k):
                continue
            c = a["config"]
            name = f"solder {c['bm']}x{c['bn']}x{c['bk']} s{c['stages']} k{c['split_k']}"
            ms = min(a["ms"], b["ms"])
            print(f"| {name} | {a['ms']:.4f} | {b['ms']:.4f} | {2.0 * m * n * k / ms / 1e9:.1f} | {base / ms:.2f} |")
    print("\n**End to end** (`solder bench --no-fuse`, weights K x N as in examples/ffn.sol, the cost model's tile)\n")
    print("| program | median µs |")
    print("|---|---|")
    for f in sorted(glob.glob(os.path.join(d, "*.bench.log"))):
        text = open(f).read()
        t = re.search(r"median ([0-9.]+) us", text)
        print(f"| {os.path.basename(f).replace('.sol.bench.log', '')} | {t.group(1) if t else '?'} |")


if __name__ == "__main__":
    main()
