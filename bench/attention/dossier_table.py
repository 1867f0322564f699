#!/usr/bin/env python3
"""The ncu table of issue 17's dossier call: one row per profiled kernel, from ncu's raw CSV pages.

    python3 bench/attention/dossier_table.py DIR [--md OUT.md]

DIR holds what bench/attention/dossier_call.sh writes: CELL.csv (`ncu --page raw --csv` of one
`solder bench` launch of the cell, one row per kernel), CELL.out (the program's own output, where ncu's
lines may land too) and peers.csv / peers.out (dossier_peer_ncu.py: its "profiled CASE PEER ..." lines
name the cells of peers.csv's kernels in order). Per kernel: the duration under ncu and the SM clock,
tensor-pipe activity, the XU pipe's (MUFU: the exponentials), issue slots busy, warps issued / eligible / active per scheduler, the two largest
stall reasons (warps per issued instruction, and their share of all the warp states per issue; "selected",
the issue itself, is not a stall), DRAM and L2 throughput and bytes, registers, theoretical and achieved
occupancy. Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
TIME_SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}
FREQ_SCALE = {"cycle/nsecond": 1e3, "ghz": 1e3, "cycle/usecond": 1.0, "mhz": 1.0, "cycle/second": 1e-6, "hz": 1e-6,
              "cycle/msecond": 1e-3, "khz": 1e-3}
BYTE_SCALE = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12}


def csv_lines(path):
    """The CSV lines of a file in which other text (the program's, ncu's ==PROF== lines) may be mixed."""
    if not os.path.exists(path):
        return []
    return [line for line in open(path, errors="replace") if line.startswith('"')]


def read_kernels(paths):
    """Every kernel row of ncu raw CSV pages found in the files: a list of {metric: (value, unit)}."""
    out = []
    for path in paths:
        lines = csv_lines(path)
        rows = list(csv.reader(io.StringIO("".join(lines))))
        head, units = None, {}
        for row in rows:
            if row and row[0] == "ID":
                head, units = row, {}
                continue
            if head is None or len(row) != len(head):
                continue
            if row[0] == "" and not units:       # the units row follows the header
                units = dict(zip(head, row))
                continue
            out.append({k: (v, units.get(k, "")) for k, v in zip(head, row)})
    return out


def number(k, name):
    v = k.get(name)
    if not v or v[0] in ("", "n/a"):
        return None
    try:
        return float(v[0].replace(",", ""))
    except ValueError:
        return None


def scaled(k, name, table):
    x = number(k, name)
    if x is None:
        return None
    unit = k[name][1].strip().lower()
    return x * table.get(unit, 1.0)


def summary(k):
    """The dossier's numbers of one kernel row."""
    stalls = {}
    for name in k:
        m = STALL.match(name)
        x = number(k, name) if m else None
        if x is not None:
            stalls[m.group(1)] = x
    per_issue = number(k, "smsp__average_warp_latency_per_inst_issued.ratio") or sum(stalls.values()) or None
    top = sorted(((x, r) for r, x in stalls.items() if r != "selected"), reverse=True)[:2]
    freq = None
    for name in ("smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.avg.per_second"):
        freq = scaled(k, name, FREQ_SCALE)
        if freq:
            break
    dram_bytes = [scaled(k, n, BYTE_SCALE) for n in ("dram__bytes_read.sum", "dram__bytes_write.sum")]
    return {
        "kernel": k.get("Kernel Name", ("?", ""))[0],
        "grid": k.get("Grid Size", ("", ""))[0], "block": k.get("Block Size", ("", ""))[0],
        "us": scaled(k, "gpu__time_duration.sum", TIME_SCALE),
        "mhz": freq,
        "tensor": number(k, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
        "xu": number(k, "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
        "issue": number(k, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
        "issued": number(k, "smsp__issue_active.avg.per_cycle_active"),
        "eligible": number(k, "smsp__warps_eligible.avg.per_cycle_active"),
        "active": number(k, "smsp__warps_active.avg.per_cycle_active"),
        "stalls": [(r, x, (100.0 * x / per_issue) if per_issue else None) for x, r in top],
        "per_issue": per_issue,
        "dram": number(k, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "l2": number(k, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "dram_gb": (sum(b for b in dram_bytes if b) / 1e9) if any(dram_bytes) else None,
        "regs": number(k, "launch__registers_per_thread"),
        "occ_theory": number(k, "sm__maximum_warps_per_active_cycle_pct"),
        "occ": number(k, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "smem_kb": (scaled(k, "launch__shared_mem_per_block", BYTE_SCALE) or 0) / 1e3 or None,
    }


def peer_cells(out_path):
    """The cells of peers.csv's kernels, in order, from dossier_peer_ncu.py's "profiled" lines."""
    if not os.path.exists(out_path):
        return []
    return [" ".join(line.split()[1:3]) for line in open(out_path, errors="replace") if line.startswith("profiled ")]


def collect(d):
    """[(cell, summary)] for every kernel under DIR, Solder's cells in file order, then the peers."""
    rows = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".csv") or name == "peers.csv":
            continue
        cell = name[:-len(".csv")]
        for k in read_kernels([os.path.join(d, name), os.path.join(d, cell + ".out")]):
            rows.append((cell, summary(k)))
    kernels = read_kernels([os.path.join(d, "peers.csv"), os.path.join(d, "peers.out")])
    cells = peer_cells(os.path.join(d, "peers.out"))
    for i, k in enumerate(kernels):
        cell = cells[i] if len(cells) == len(kernels) else "peer (kernel %d of %d)" % (i + 1, len(kernels))
        rows.append((cell, summary(k)))
    return rows


def f(x, fmt="%.1f"):
    return fmt % x if x is not None else "—"


def table(rows):
    out = ["| cell | kernel | grid × block | µs (ncu) | SM MHz | tensor pipe % | XU pipe % | issue slots % | issued / eligible / "
           "active warps per scheduler | top stalls (warps per issue, share) | DRAM % (GB) | L2 % | regs | "
           "occupancy theor. / achieved % |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell, s in rows:
        stalls = "; ".join(f"{r} {x:.2f} ({f(p, '%.0f')} %)" for r, x, p in s["stalls"]) or "—"
        name = s["kernel"] if len(s["kernel"]) <= 48 else s["kernel"][:45] + "…"
        out.append(f"| {cell} | `{name}` | {s['grid']} × {s['block']} | {f(s['us'])} | {f(s['mhz'], '%.0f')} | "
                   f"{f(s['tensor'])} | {f(s['xu'])} | {f(s['issue'])} | {f(s['issued'], '%.2f')} / {f(s['eligible'], '%.2f')} / "
                   f"{f(s['active'], '%.2f')} | {stalls} | {f(s['dram'])} ({f(s['dram_gb'], '%.2f')}) | "
                   f"{f(s['l2'])} | {f(s['regs'], '%.0f')} | {f(s['occ_theory'])} / {f(s['occ'])} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--md", default=None, help="also write the table to this file")
    a = ap.parse_args(argv)
    text = table(collect(a.dir))
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
