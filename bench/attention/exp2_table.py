#!/usr/bin/env python3
"""The summary table of bench/attention/exp2_call.sh: each cell's µs per round at each share of the
exponentials on the FMA pipe (modes e0, e1, e2, e4: SOLDER_ATTN_EXP2_FMA=E), each mode's median against
e0's, and against the cell's peer from the same call (cuDNN SDPA; FlexAttention for alibi).

    exp2_table.py SOLDER_JSONL PEERS_JSONL
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import read_jsonl  # noqa: E402

MODES = ["e0", "e1", "e2", "e4"]


def read(path):
    try:
        return read_jsonl(path)
    except OSError:
        return []


def main():
    solder, peers = read(sys.argv[1]), read(sys.argv[2])
    times, order = {}, []
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            order.append(r["case"])
        if "median_us" in res:
            times[r["case"]].setdefault(r.get("mode", "e0"), []).append(res["median_us"])
    peer = {}
    for p in peers:
        if p.get("status") == "ok" and "median_us" in p:
            peer[(p["case"], p.get("peer"))] = p["median_us"]

    def med(xs):
        return statistics.median(xs) if xs else None

    print("| cell | " + " | ".join(f"E={m[1:]} µs" for m in MODES) + " | " +
          " | ".join(f"E={m[1:]}/E=0" for m in MODES[1:]) + " | peer µs | best/peer | E=0/peer |")
    print("|---|" + "---|" * (2 * len(MODES) + 2))
    for case in order:
        t = times[case]
        base = med(t.get("e0"))
        name, value = ("Flex", peer.get((case, "flex"))) if case.startswith("alibi") else ("cuDNN", peer.get((case, "sdpa_cudnn")))
        cols = [" / ".join(f"{x:.1f}" for x in t.get(m, [])) or "—" for m in MODES]
        ratios = ["—" if base is None or not t.get(m) else f"{med(t[m]) / base:.3f}" for m in MODES[1:]]
        meds = {m: med(t[m]) for m in MODES if t.get(m)}
        best = min(meds.values()) if meds else None
        bp = "—" if best is None or value is None else f"{best / value:.3f} ({min(meds, key=meds.get)})"
        zp = "—" if base is None or value is None else f"{base / value:.3f}"
        print(f"| {case} | " + " | ".join(cols) + " | " + " | ".join(ratios) +
              f" | {'—' if value is None else f'{value:.1f} ({name})'} | {bp} | {zp} |")


if __name__ == "__main__":
    main()
