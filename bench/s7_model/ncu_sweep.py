#!/usr/bin/env python3
"""s7-model (issue 15, twentieth session): the ncu records of bench/s7_model/call.sh as a table and as a
`solder plan --validate` sweep of the kernels' own durations.

  python3 bench/s7_model/ncu_sweep.py NCU_DIR --table            the counters per kernel, Markdown
  python3 bench/s7_model/ncu_sweep.py NCU_DIR --sweep OUT.json   the GEMM kernels' durations as a sweep

NCU_DIR holds call.sh's CELL.csv files (ncu --page raw --csv, one row per kernel). A cell is a case id of
bench/suites.py, or CASE@SOLDER_GEMM_TILE=TILE@M,N,K; each GEMM kernel's problem and tile come from
`solder emit --cuda --report` of that case with the cell's knob (SOLDER, default build/solder): run it with a
binary whose planner is the call's (a planner cell is labelled with the tile this binary chooses). Durations are ncu's gpu__time_duration (one profiled launch,
caches flushed between passes, --clock-control none: the SM clock is in the table).
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import suites  # noqa: E402

COLUMNS = [  # (metric, heading, scale)
    ("gpu__time_duration.sum", "µs", 1e-3),
    ("sm__cycles_elapsed.avg.per_second", "SM MHz", 1e-6),
    ("launch__grid_size", "blocks", 1),
    ("launch__registers_per_thread", "regs", 1),
    ("dram__bytes_read.sum", "DRAM read MB", 1e-6),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %", 1),
    ("lts__t_sectors_srcunit_tex_op_read.sum", "L2 reads from SMs MB", 32e-6),
    ("lts__t_sector_hit_rate.pct", "L2 hit %", 1),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 %", 1),
    ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor % (active)", 1),
    ("sm__cycles_active.max", "busiest SM µs", None),  # cycles / clock
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue %", 1),
    ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "stall long sb", 1),
    ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "stall wait", 1),
    ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "stall barrier", 1),
    ("smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio", "stall gmma", 1),
    ("smsp__average_warps_issue_stalled_membar_per_issue_active.ratio", "stall membar", 1),
]


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return float("nan")


def kernels(path):
    rows = list(csv.reader(open(path)))
    header = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if header is None:
        return []
    names = rows[header]
    return [dict(zip(names, r)) for r in rows[header + 1:] if len(r) == len(names) and r[0].isdigit()]


def cell_of(path):
    """(case id, knob or None) from call.sh's file name CASE[-SOLDER_GEMM_TILE-TILE-M-N-K].csv."""
    name = os.path.basename(path)[:-4]
    m = re.match(r"^(.*?)-SOLDER_GEMM_TILE-(\w+)-(\d+)-(\d+)-(\d+)$", name)
    if m:
        return m.group(1), f"SOLDER_GEMM_TILE={m.group(2)}@{m.group(3)},{m.group(4)},{m.group(5)}"
    return name, None


def report(case_id, knob, solder):
    """Each skeleton kernel's (name, problem, config) from `solder emit --cuda --report`."""
    case = next(c for c in suites.cases("all") if c.id == case_id)
    args = case.solder_args()
    env = dict(os.environ)
    if knob:
        key, value = knob.split("=", 1)
        env[key] = value
    out = subprocess.run([solder, "emit", "--cuda", "--report"] + args, env=env, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.search(r"^(\w+) \w+: sm90 GEMM skeleton, tile BM (\d+) x BN (\d+) x BK (\d+), (\d+) stages,(?: split-K (\d+),)?"
                      r".*? M (\d+) N (\d+) K (\d+) \((\d+) blocks\)", line)
        if not m:
            continue
        bm, bn, bk, stages = (int(m.group(i)) for i in range(2, 6))
        found[m.group(1)] = {
            "dtype": "f16", "m": int(m.group(7)), "n": int(m.group(8)), "k": int(m.group(9)), "batch": 1,
            "output": "f16", "row_store": True, "dual": "dual-B" in line,
            "config": {"bm": bm, "bn": bn, "bk": bk, "stages": stages, "consumers": bm // 64, "a_k_major": True,
                       "b_k_major": False, "split_k": int(m.group(6) or 1), "cluster_m": 1, "cluster_n": 1,
                       "blocks": int(m.group(10))},
            "tile": f"{bm}x{bn}s{stages}k{int(m.group(6) or 1)}"}
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ncu_dir")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--sweep")
    ap.add_argument("--solder", default=os.environ.get("SOLDER", "build/solder"))
    ap.add_argument("--date", default="2026-11-28T21:30Z")
    ap.add_argument("--commit", default="2f6486a")
    a = ap.parse_args()
    results, lines = [], []
    for path in sorted(glob.glob(os.path.join(a.ncu_dir, "*.csv"))):
        case_id, knob = cell_of(path)
        plans = report(case_id, knob, a.solder)
        for k in kernels(path):
            name = k["Kernel Name"].split("(")[0]
            plan = next((p for n, p in plans.items() if name.startswith(n)), None)
            cells = []
            for metric, _, scale in COLUMNS:
                v = number(k.get(metric, ""))
                if scale is None:
                    v = v / number(k.get("sm__cycles_elapsed.avg.per_second", "")) * 1e6
                else:
                    v *= scale
                cells.append(f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}")
            tile = (plan["tile"] + (" dual" if plan["dual"] else "")) if plan else "?"
            problem = f"{plan['m']}x{plan['n']}x{plan['k']}" if plan else "?"
            forced = bool(plan and knob and knob.split("=")[1].split("@")[0] == plan["tile"])
            lines.append(f"| {case_id} | {name}{' (forced)' if forced else ''} | {problem} | {tile} | " +
                         " | ".join(cells) + " |")
            if plan and not plan["dual"]:
                r = {key: v for key, v in plan.items() if key not in ("dual",)}
                r["time_us"] = round(number(k["gpu__time_duration.sum"]) * 1e-3, 3)
                r["cell"] = case_id + (f"@{knob}" if knob else "")
                results.append(r)
    if a.table:
        print("| cell | kernel | problem M x N x K | tile | " + " | ".join(c[1] for c in COLUMNS) + " |")
        print("|" + "---|" * (len(COLUMNS) + 4))
        print("\n".join(lines))
    if a.sweep:
        # One record per kernel; solder plan --validate counts a (problem, configuration) measured in several
        # cells (the up projections) once, at the median.
        json.dump({"device": "NVIDIA H200", "date": a.date,
                   "kernel": "generated skeleton kernels of examples/ffn.sol and gated_ffn.sol at the gemm_chains sizes "
                             "(f16, row-store epilogue), one product's tile forced with SOLDER_GEMM_TILE per program; "
                             "each kernel's own duration from ncu (one profiled launch, caches flushed, --clock-control "
                             f"none, SM 1760-1830 MHz; bench/s7_model/call.sh, ncu_sweep.py); commit {a.commit}",
                   "results": results}, open(a.sweep, "w"), indent=1)
        print(f"{len(results)} records -> {a.sweep}", file=sys.stderr)


if __name__ == "__main__":
    main()
