#!/usr/bin/env python3
"""The table of bench/attention/short_rows2_call.sh: per cell (vanilla / gqa hd64 S 1k) and setting, the
median of `solder bench` by round, their mean and spread, the mean of the replays' minima, the mean of the
per-round ratios to the default (the settings of a round run back to back, so a round's ratio cancels
what moves between rounds) and to cuDNN SDPA measured right after that round (bench/peers.py), and
whether that mean ratio meets the target (<= 1.0x cuDNN).
Usage: short_rows2_table.py DIR (with DIR/solder.jsonl, DIR/peers-r*.jsonl)."""
import glob
import json
import os
import re
import sys


def records(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def main():
    d = sys.argv[1]
    solder = records(os.path.join(d, "solder.jsonl"))
    cudnn = {}  # (cell, round) -> µs
    for path in glob.glob(os.path.join(d, "peers-r*.jsonl")):
        r = int(re.search(r"peers-r(\d+)\.jsonl$", path).group(1))
        for rec in records(path):
            if rec.get("status") == "ok" and rec.get("peer") == "sdpa_cudnn":
                cudnn[(rec["workload"], r)] = rec["median_us"]
    tags = []
    for r in solder:
        if r["tag"] not in tags:
            tags.append(r["tag"])
    rounds = sorted({r["round"] for r in solder})
    print("| cell | setting | " + " | ".join(f"r{n}" for n in rounds) +
          " | mean | spread | min (mean) | / def (per round) | cuDNN (rounds) | / cuDNN (per round) | target |")
    print("|---|---|" + "---|" * len(rounds) + "---|---|---|---|---|---|---|")
    for cell in ("vanilla", "gqa"):
        us_of = {tag: {r["round"]: r["median_us"] for r in solder if r["program"] == cell and r["tag"] == tag} for tag in tags}
        cud = {n: cudnn[(cell, n)] for n in rounds if (cell, n) in cudnn}
        cud_text = "/".join(f"{cud[n]:.1f}" for n in rounds if n in cud) or "-"
        for tag in tags:
            us = us_of[tag]
            if not us:
                continue
            mins = [r.get("min_us") for r in solder if r["program"] == cell and r["tag"] == tag and r.get("min_us")]
            cols = " | ".join(f"{us[n]:.1f}" if n in us else "-" for n in rounds)
            mean = sum(us.values()) / len(us)
            base = us_of.get("def", {})
            paired = [us[n] / base[n] for n in us if n in base]
            rel = f"{sum(paired) / len(paired):.3f}" if paired else "-"
            vs = [us[n] / cud[n] for n in us if n in cud]
            vs_mean = sum(vs) / len(vs) if vs else None
            vs_text = f"**{vs_mean:.3f}** ({min(vs):.3f}-{max(vs):.3f})" if vs else "-"
            target = "-" if vs_mean is None else ("met" if vs_mean <= 1.0 else "MISSED")
            min_text = f"{sum(mins) / len(mins):.1f}" if mins else "-"
            print(f"| {cell} | {tag} | {cols} | {mean:.1f} | {max(us.values()) - min(us.values()):.1f} | {min_text} | {rel} | {cud_text} | {vs_text} | {target} |")


if __name__ == "__main__":
    main()
