#!/usr/bin/env bash
# Nsight Compute profile of Solder's kernels, for the "why" of a missed target (bench/NOTES.md).
# Runs `solder run --backend cuda` once per case under ncu (clocks left alone: --clock-control none)
# and prints, per kernel: time, SM and DRAM throughput, tensor-pipe activity, achieved occupancy,
# registers, shared-memory bank conflicts and the top warp-stall reasons. Needs a GPU, ncu and a built
# build/solder.
# Usage: bench/profile.sh OUT_DIR 'label|example|args...' ...
#   e.g. bench/profile.sh /tmp/prof 'vanilla|vanilla|' 'variance-V8|variance|--dim BS=1024 --dim L=32768'
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1; shift
mkdir -p "$out"
ncu_bin=${NCU:-ncu}
metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,\
launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,\
smsp__issue_active.avg.pct_of_peak_sustained_active,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
for spec in "$@"; do
  IFS='|' read -r label example args <<< "$spec"
  echo "== $label: solder run examples/$example.sol $args"
  # shellcheck disable=SC2086
  timeout 240 "$ncu_bin" --clock-control none --metrics "$metrics" --csv --page raw \
    build/solder run --backend cuda "examples/$example.sol" $args > "$out/$label.csv" 2> "$out/$label.err"
  echo "   rc=$? ($out/$label.csv)"
  python3 - "$out/$label.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 2:
    print("   no kernels profiled"); sys.exit(0)
head = rows[0]
units = dict(zip(head, rows[1])) if rows[1][0] == "" else {}
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
short = {"gpu__time_duration.sum": "us", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM%",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM%",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor%",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%", "launch__registers_per_thread": "regs",
         "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
         "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "bank-confl"}
for r in rows[2:] if rows[1][0] == "" else rows[1:]:
    d = dict(zip(head, r))
    name = d.get("Kernel Name", "?")
    vals = []
    for k, s in short.items():
        v = d.get(k, "")
        if k == "gpu__time_duration.sum" and v:
            v = f"{float(v.replace(',', '')) * scale.get(units.get(k, 'nsecond'), 1e-3):.1f}"
        vals.append(f"{s}={v}")
    stalls = sorted(((float(d[k].replace(',', '') or 0), k.split("stalled_")[1].split("_per")[0])
                     for k in d if "issue_stalled" in k and d[k]), reverse=True)[:4]
    print(f"   {name[:40]:40} " + " ".join(vals))
    print("      stalls (warps per issue): " + ", ".join(f"{n} {v:.2f}" for v, n in stalls))
PY
done
