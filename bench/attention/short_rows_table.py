#!/usr/bin/env python3
"""The table of bench/attention/short_rows_call.sh: per cell (vanilla / gqa hd64 S 1k) and setting, the
medians of `solder bench` by round, their mean against the default's and against cuDNN SDPA of the
same call (bench/peers.py). Usage: short_rows_table.py DIR (with DIR/solder.jsonl, DIR/peers.jsonl)."""
import json
import os
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
    peers = {r["workload"]: r for r in records(os.path.join(d, "peers.jsonl")) if r.get("status") == "ok"}
    tags = []
    for r in solder:
        if r["tag"] not in tags:
            tags.append(r["tag"])
    rounds = sorted({r["round"] for r in solder})
    print("| cell | setting | " + " | ".join(f"round {n}" for n in rounds) + " | mean | spread | /def | cuDNN | /cuDNN |")
    print("|---|---|" + "---|" * len(rounds) + "---|---|---|---|---|")
    for cell in ("vanilla", "gqa"):
        mean = {}
        for tag in tags:
            us = {r["round"]: r["median_us"] for r in solder if r["program"] == cell and r["tag"] == tag}
            if us:
                mean[tag] = sum(us.values()) / len(us)
        cudnn = peers.get(cell, {}).get("median_us")
        for tag in tags:
            us = {r["round"]: r["median_us"] for r in solder if r["program"] == cell and r["tag"] == tag}
            if not us:
                continue
            cols = " | ".join(f"{us[n]:.1f}" if n in us else "-" for n in rounds)
            rel = f"{mean[tag] / mean['def']:.3f}" if "def" in mean else "-"
            cud = f"{cudnn:.1f}" if cudnn else "-"
            vs = f"**{mean[tag] / cudnn:.3f}**" if cudnn else "-"
            print(f"| {cell} | {tag} | {cols} | {mean[tag]:.1f} | {max(us.values()) - min(us.values()):.1f} | {rel} | {cud} | {vs} |")


if __name__ == "__main__":
    main()
