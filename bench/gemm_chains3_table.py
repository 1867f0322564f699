#!/usr/bin/env python3
"""The tables of bench/gemm_chains3.sh's output folder (gemm-chains3, bench/NOTES.md): Solder's 36 cases
against the best peer of the same call, the A/B runs (PDL off; the old one-round-per-replay method), the
tile sweep and the forced whole cases, as Markdown.

    python3 bench/gemm_chains3_table.py RESULTS_DIR
"""
import json
import os
import sys


def load(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def main():
    d = sys.argv[1]
    solder = {r["case"]: r["result"] for r in load(os.path.join(d, "solder.jsonl")) if r.get("result")}
    peers = {}
    for r in load(os.path.join(d, "peers.jsonl")):
        if r.get("case") and r.get("median_us") and r.get("verified", True):
            peers.setdefault(r["case"], {})[r["peer"]] = r["median_us"]
    ab = {}
    for r in load(os.path.join(d, "solder-ab.jsonl")):
        if r.get("result"):
            key = "old" if "calls-per-replay 1" in r.get("flags", "") else "nopdl"
            ab.setdefault(r["case"], {})[key] = r["result"]["median_us"]
    forced = [(r["case"], r["env"], r["result"]["median_us"]) for r in load(os.path.join(d, "solder-forced.jsonl")) if r.get("result")]

    print("| case | floor µs | Solder µs | calls / replay | torch eager µs | torch.compile µs | Solder / best peer |")
    print("|---|---|---|---|---|---|---|")
    under = 0
    ratios = []
    for case, r in solder.items():
        p = peers.get(case, {})
        best = min(p.values()) if p else None
        ratio = r["median_us"] / best if best else None
        if ratio is not None:
            ratios.append(ratio)
            under += ratio <= 1.0
        fmt = lambda x: f"{x:.3g}" if x is not None else "—"
        print(f"| {case} | {r['floor_us']:.3g} | {r['median_us']:.3g} | {r.get('calls_per_replay', '?')} | {fmt(p.get('eager'))} | "
              f"{fmt(p.get('compile'))} | {'**' if ratio is not None and ratio <= 1 else ''}{ratio:.2f}{'**' if ratio is not None and ratio <= 1 else ''} |"
              if ratio is not None else f"| {case} | {r['floor_us']:.3g} | {r['median_us']:.3g} | {r.get('calls_per_replay', '?')} | — | — | — |")
    if ratios:
        g = 1.0
        for x in ratios:
            g *= x
        print(f"\n{under} of {len(ratios)} cells at or under 1.0x; geomean {g ** (1 / len(ratios)):.3f}x")

    if ab:
        print("\n| case | old method, PDL off µs | peers' method, PDL off µs | peers' method, PDL on µs (the table) |")
        print("|---|---|---|---|")
        for case, v in ab.items():
            s = solder.get(case, {}).get("median_us")
            print(f"| {case} | {v.get('old', float('nan')):.3g} | {v.get('nopdl', float('nan')):.3g} | {s:.3g} |")
    sweep = os.path.join(d, "sweep.tsv")
    if os.path.exists(sweep):
        print("\n| product (skinny.sol, M 128) | tile | µs |")
        print("|---|---|---|")
        for line in open(sweep):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 4:
                print(f"| {parts[1]} | {parts[2]} | {parts[3]} |")
    if forced:
        print("\n| case | forced | µs | model's µs |")
        print("|---|---|---|---|")
        for case, env, us in forced:
            s = solder.get(case, {}).get("median_us")
            print(f"| {case} | {env} | {us:.3g} | {s:.3g} |")


if __name__ == "__main__":
    main()
