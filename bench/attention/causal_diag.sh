#!/usr/bin/env bash
# causal hd64 S1k diagnosis: A/B knobs and an ncu of causal vs vanilla (run from the repo root on the device)
# The tenth session's integrator ran it once (H100, 2026-11-27 16:00 UTC): carry .devcarry/m10d (stripped solder, its NVRTC cache) and the CuTe headers;
#   results bench/results/h100/integrator-2026-11-27-s10/causal-diag/, bench/NOTES.md (tenth session, integrator).
set -uo pipefail
S=.devcarry/m10d/solder; export SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/cutlass SOLDER_CACHE_DIR=$PWD/.devcarry/m10d/cache
D="--dim B=16 --dim H=16 --dim S=1024 --dim D=64"
b() { local us; us=$(env $1 $S bench examples/$2.sol $D --json 2>/dev/null | python3 -c "import sys,json; print('%.2f' % json.loads([l for l in sys.stdin if l.startswith('{')][0])['median_us'])"); echo "$2 [$1] $us"; }
for round in 1 2; do
  for v in "X=0" "SOLDER_ATTN_SHORT=old" "SOLDER_GRID_ORDER=plain" "SOLDER_ATTN_STAGES=6" "SOLDER_ATTN_STAGGER=1" "SOLDER_ATTN_QBUFFERS=1"; do b "$v" causal; done
  b X=0 vanilla
done
for ex in causal vanilla; do
  timeout 60 ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $S bench examples/$ex.sol $D --replays 1 > $OUT/ncu-$ex.txt 2>&1; echo "ncu $ex rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issued Warp|No Eligible|Stall|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Eligible Warps" $OUT/ncu-$ex.txt | head -30
done
