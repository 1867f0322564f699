#!/usr/bin/env python3
"""Where a kernel's warps spend their time, by region of its SASS, from ncu's per-instruction page.

    python3 bench/attn_s1k/sass_regions.py KERNEL-sass.csv[.gz] [MORE ...] [--min-samples 40] [--md]

The input is `ncu -i REPORT --page source --csv --print-source sass` of a report taken with the SourceCounters
section (bench/attn_s1k/call.sh writes one per profiled kernel), plain or gzip-compressed. A region is a run of consecutive instructions
executed the same number of times (warp-level `Instructions Executed`): in an attention kernel on persistent
blocks that separates the block's setup (once per warp), the work tile's head and tail (once per work tile and
consumer warp), the key-tile loop (once per key tile and consumer warp) and the producer's code. Each region
is printed with its address range, execution count, instruction count, its share of the warp-state samples
(`Warp Stall Sampling (All Samples)`, proportional to warp time), its three largest stall reasons and its most
frequent opcodes; regions under --min-samples samples and 20 instructions are left out. --md prints Markdown.
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip


def regions(path):
    text = gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")
    rows = list(csv.reader(text))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[header]
    data = [dict(zip(hdr, r)) for r in rows[header + 1:] if len(r) == len(hdr)]
    reasons = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]
    base = int(data[0]["Address"], 16)
    out, cur = [], None
    for d in data:
        e = int(d["Instructions Executed"] or 0)
        a = int(d["Address"], 16) - base
        s = int(d["Warp Stall Sampling (All Samples)"] or 0)
        if cur is None or cur["exec"] != e:
            cur = {"exec": e, "a0": a, "a1": a, "n": 0, "samples": 0,
                   "reasons": collections.Counter(), "ops": collections.Counter()}
            out.append(cur)
        cur["a1"] = a
        cur["n"] += 1
        cur["samples"] += s
        for r in reasons:
            if d[r] not in ("", "0"):
                cur["reasons"][r[len("stall_"):]] += int(d[r])
        words = [w for w in d["Source"].split() if not w.startswith("@")]
        if words:
            cur["ops"][words[0].split(".")[0]] += 1
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--min-samples", type=int, default=40)
    ap.add_argument("--md", action="store_true")
    a = ap.parse_args(argv)
    for path in a.csv:
        regs = regions(path)
        total = sum(r["samples"] for r in regs) or 1
        print(f"{path}: {sum(r['n'] for r in regs)} instructions, {total} samples")
        if a.md:
            print("\n| addresses | executed | instructions | samples | share | stalls | opcodes |\n|---|---|---|---|---|---|---|")
        for r in regs:
            if r["samples"] < a.min_samples and r["n"] < 20:
                continue
            stalls = " ".join(f"{k} {v}" for k, v in r["reasons"].most_common(3))
            ops = " ".join(f"{k}×{v}" for k, v in r["ops"].most_common(5))
            share = 100.0 * r["samples"] / total
            if a.md:
                print(f"| {r['a0']:#x}–{r['a1']:#x} | {r['exec']} | {r['n']} | {r['samples']} | {share:.1f} % | {stalls} | {ops} |")
            else:
                print(f"  {r['a0']:6x}-{r['a1']:6x} exec {r['exec']:>8} n {r['n']:>4} samples {r['samples']:>6} "
                      f"({share:4.1f} %) [{stalls}] {ops}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
