#!/usr/bin/env python3
"""The summary table of bench/attention/variants3_call.sh: per cell, each setting's rounds (µs, median of
CUDA-graph replays), its median over the rounds against the default's, the fastest setting, and the ratios
to FlexAttention in max-autotune mode (from an earlier call's records, named on the command line) and to
FlexAttention in default mode measured in the same call, where it ran.

    variants3_table.py SOLDER_JSONL FLEX_MAX_AUTOTUNE_JSONL [SAME_CALL_PEERS_JSONL]

Records: SOLDER_JSONL lines {"case", "mode", "result": {"median_us", ...} | null} (mode "def" is the
emitter's default); the peer files are bench/peers.py's (peer "flex", status "ok", median_us).
"""
import json
import statistics
import sys

ORDER = ["def", "F", "E", "FE", "C2FE"]


def read_jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def flex_times(path):
    return {p["case"]: p["median_us"] for p in read_jsonl(path)
            if p.get("peer") == "flex" and p.get("status") == "ok" and "median_us" in p}


def table(solder, flex_ma, flex_default):
    times, cases = {}, []
    for r in solder:
        res = r.get("result") or {}
        if r["case"] not in times:
            times[r["case"]] = {}
            cases.append(r["case"])
        xs = times[r["case"]].setdefault(r.get("mode", "def"), [])  # (a failed run: listed, no time)
        if "median_us" in res:
            xs.append(res["median_us"])
    lines = ["| cell | setting | rounds µs | median µs | /def | Flex max-autotune µs (call3) | /Flex MA | Flex default µs (this call) | fastest |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        t = times[case]
        med = {m: statistics.median(x) for m, x in t.items() if x}
        best = min(med, key=med.get) if med else None
        base = med.get("def")
        fm, fd = flex_ma.get(case), flex_default.get(case)
        for m in sorted(t, key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER)):
            xs = t[m]
            v = med.get(m)
            lines.append(
                f"| {case} | {m} | {' / '.join(f'{x:.1f}' for x in xs) or '—'} | {'—' if v is None else f'{v:.1f}'} | "
                f"{'—' if v is None or base is None else f'{v / base:.3f}'} | {'—' if fm is None else f'{fm:.1f}'} | "
                f"{'—' if v is None or fm is None else f'{v / fm:.3f}'} | {'—' if fd is None else f'{fd:.1f}'} | "
                f"{'**yes**' if m == best else ''} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    solder = read_jsonl(argv[1])
    flex_ma = flex_times(argv[2])
    flex_default = flex_times(argv[3]) if len(argv) > 3 else {}
    print(table(solder, flex_ma, flex_default))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
