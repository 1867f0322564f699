#!/usr/bin/env bash
# One device call for the attention skeleton: the device test, SASS facts, the suite table twice with
# the peers (cuDNN and FlashAttention SDPA) between and after (solder, [variant,] peers, solder,
# [variant,] peers; bin/bench_attention_variant: an A/B build, if staged), and optionally an ncu profile. Runs from a folder holding bin/{test_sm90_attention,bench_attention,
# libgomp.so.1} and bench/attention/peer.py, staged by bench/attention/stage.sh. Logs and JSON go to $OUT.
# Usage: device_run.sh [test] [sass] [table] [ncu]   (default: test sass table)
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-test sass table}
CUDA=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$PWD/bin:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
hung=0
for step in $steps; do
  [ $hung = 1 ] && break
  start=$(date +%s)
  case $step in
    test) timeout 100 ./bin/test_sm90_attention 2026 > "$OUT/test.log" 2>&1; rc=$?; echo "test rc=$rc" > "$OUT/test.summary"
          if [ $rc = 124 ]; then echo "test timed out (a hang): skipping the rest"; hung=1; fi
          grep -E "^FAIL|^OK:|^FAILED" "$OUT/test.log" | head -30 >> "$OUT/test.summary"; tail -3 "$OUT/test.log"; cat "$OUT/test.summary" ;;
    sass) for b in test_sm90_attention bench_attention; do
            "$CUDA/bin/cuobjdump" -sass "bin/$b" > "$OUT/$b.sass" 2>&1
            echo "$b: $(grep -c HGMMA "$OUT/$b.sass") HGMMA, $(grep -c UTMALDG "$OUT/$b.sass") UTMALDG, $(grep -c USETMAXREG "$OUT/$b.sass") USETMAXREG, $(grep -cE 'LDL|STL' "$OUT/$b.sass") LDL/STL, $(grep -c 'MUFU.EX2' "$OUT/$b.sass") MUFU.EX2"
            gzip -f "$OUT/$b.sass"
          done ;;
    table) for run in 1 2; do
             timeout 150 ./bin/bench_attention table "$OUT/solder$run.json" 2>&1 | tee "$OUT/solder$run.log"
             # An A/B variant built with other flags, timed next to the default (optional).
             if [ -x bin/bench_attention_variant ]; then
               timeout 150 ./bin/bench_attention_variant table "$OUT/variant$run.json" 2>&1 | tee "$OUT/variant$run.log"
             fi
             timeout 150 python3 bench/attention/peer.py "$OUT/peer$run.json" 2>&1 | tee "$OUT/peer$run.log"
           done ;;
    ncu) NCU=$(command -v ncu || ls "$CUDA"/bin/ncu 2>/dev/null | head -1)
         if [ -n "$NCU" ]; then
           timeout 120 "$NCU" --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
             --section ComputeWorkloadAnalysis -k regex:attention_kernel --launch-count 3 ./bin/bench_attention profile > "$OUT/ncu.txt" 2>&1
           grep -E "attention_kernel|Duration|Compute \(SM\) Throughput|DRAM Throughput|Issued Warp" "$OUT/ncu.txt" | cut -c1-150 | head -24
           # Stall reasons and tensor-pipe activity (metric names may differ between ncu versions: a separate run).
           m=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
           m=$m,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct
           m=$m,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct
           m=$m,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct
           m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_selected_per_warp_active.pct
           timeout 90 "$NCU" --metrics "$m" -k regex:attention_kernel --launch-count 3 ./bin/bench_attention profile > "$OUT/ncu_stalls.txt" 2>&1
           grep -E "attention_kernel|stalled|gmma|ERR" "$OUT/ncu_stalls.txt" | cut -c1-150 | head -40
         else echo "no ncu"; fi ;;
  esac
  echo "step $step: $(( $(date +%s) - start )) s"
done
python3 bench/attention/report.py "$OUT" > "$OUT/table.md" 2>&1; cat "$OUT/table.md"
# The device tool returns only a few files: pack everything but the summaries into one archive.
tar czf /tmp/attn-results.tgz -C "$OUT" . && mv /tmp/attn-results.tgz "$OUT/a-results.tgz" && \
  find "$OUT" -type f ! -name a-results.tgz ! -name gpu.txt ! -name test.summary ! -name table.md -delete
ls -la "$OUT"; true
