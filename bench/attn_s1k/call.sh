#!/usr/bin/env bash
# attn-s1k's device call (issue 17, twenty-second session), a wrapper around bench/merged_call.sh, from the root
# bench/big_gemm/stage.sh stages with this folder's spots and checks (CuTe headers in ../cutlass, every kernel
# compiled ahead in kernels.tar.xz):
#   DT=/nonexistent bash bench/big_gemm/stage.sh /work/main/.devcarry/attn-s1k bench/attn_s1k/ab.spots bench/attn_s1k/verify.txt
#   cd .devcarry/attn-s1k && LIMIT=124 bash bench/attn_s1k/call.sh          (DRY_RUN=1: the commands, no GPU)
#   1. `solder run --backend cuda` (float64 reference) of each line of bench/attn_s1k/verify.txt through
#      bench/verify_lines.sh, 4 at a time, each under VERIFY_SECONDS (default 30), into $OUT/checks.tgz;
#   2. merged_call.sh with bench/attn_s1k/ab.spots (every setting of the four hd64 S 1k cells, cuDNN SDPA beside
#      vanilla / gqa), ROUNDS (default 2) interleaved rounds, under MC_SECONDS (default 72), into $OUT/r.tgz;
#   3. ncu of Solder's vanilla hd64 S 1k kernel (one `solder bench --replays 1`) and of cuDNN SDPA's at the same
#      cell (bench/attention/dossier_peer_ncu.py: one profiled call after the warm-up), --clock-control none,
#      the dossier's sections plus SourceCounters (stall samples per SASS instruction) and the SMs' active
#      cycles (min / mean / max: the tail), one ncu process each, into $OUT/ncu.tgz (report files, the raw
#      metrics as CSV, the per-instruction page as CSV); a cell starts only with NCU_MIN_LEFT (default 15) s left;
#   4. merged_call.sh with bench/attn_s1k/flex.spots (FlexAttention with its tile fixed: FLEX_CONFIGS, passed as
#      peers.py --flex-configs), one round, if 25 s of LIMIT are left, into $OUT/flex.tgz.
# $OUT: checks.tgz, r.tgz, ncu.tgz, flex.tgz, call.log.
. bench/call_prologue.sh
FLEX_CONFIGS=${FLEX_CONFIGS:-64:64x64w4s3+128x64w4s3}

stamp "== 1. checks: bench/attn_s1k/verify.txt ($(left) s left)"
C=/tmp/attn-s1k-checks; rm -rf "$C"; mkdir -p "$C"
OUT=$C DRY_RUN=$DRY PARALLEL=4 VERIFY_SECONDS=${VERIFY_SECONDS:-30} bash bench/verify_lines.sh bench/attn_s1k/verify.txt
[ "$DRY" = 1 ] || tar czf "$O/checks.tgz" -C "$C" .

stamp "== 2. rounds: merged_call.sh bench/attn_s1k/ab.spots ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left, a peers step with 30: its DEADLINE is
# what this call keeps for the rounds (MC_SECONDS) + 55, under an outer timeout of MC_SECONDS
mc=${MC_SECONDS:-72}
OUT=/tmp/mc DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} PEER_ARGS="--reps 50" \
  DEADLINE=$(( mc + 55 )) SPOTS=bench/attn_s1k/ab.spots timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/r.tgz" -C /tmp/mc r; head -40 /tmp/mc/r/summary.md 2>/dev/null; }

stamp "== 3. ncu ($(left) s left)"
W=/tmp/attn-s1k-ncu; rm -rf "$W"; mkdir -p "$W"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section SourceCounters --section Occupancy --section LaunchStats"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,\
smsp__inst_executed.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,\
sm__cycles_elapsed.avg.per_second,launch__registers_per_thread,launch__grid_size,dram__bytes_read.sum,\
lts__t_sector_hit_rate.pct
args=$(python3 bench/suites.py --suite attention --cases '^vanilla-d64-s1024$' --solder-commands --out /dev/null | sed 's/^.* bench //; s/ --json.*//')
for cell in solder cudnn; do
  if [ "$DRY" != 1 ] && [ "$(left)" -lt "${NCU_MIN_LEFT:-15}" ]; then stamp "   deadline: $cell and the rest not profiled"; break; fi
  t=$(( $(left) - 3 )); [ "$t" -gt 32 ] && t=32
  case $cell in
  solder) cmd="ncu --clock-control none --target-processes application-only --kernel-name regex:fused --launch-count 1
            $SECTIONS --metrics $METRICS -f -o $W/$cell build/solder bench $args --replays 1 --calls-per-replay 1" ;;
  cudnn)  cmd="ncu --clock-control none --target-processes application-only --profile-from-start off
            --kernel-name regex:sdpa --launch-count 1 $SECTIONS --metrics $METRICS -f -o $W/$cell
            python3 bench/attention/dossier_peer_ncu.py --cells vanilla-d64-s1024:sdpa_cudnn --deadline $(( start + LIMIT - 3 ))" ;;
  esac
  if [ "$DRY" = 1 ]; then echo "timeout $t $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout "$t" $cmd > "$W/$cell.out" 2>&1
  rc=$?
  ncu -i "$W/$cell.ncu-rep" --page raw --csv > "$W/$cell-raw.csv" 2>/dev/null
  ncu -i "$W/$cell.ncu-rep" --page source --csv --print-source sass > "$W/$cell-sass.csv" 2>/dev/null
  stamp "   $cell rc $rc ($(wc -l < "$W/$cell-sass.csv" 2>/dev/null) SASS lines)"
  tar czf "$O/ncu.tgz" -C "$W" .
done

stamp "== 4. FlexAttention (tile fixed: $FLEX_CONFIGS) beside Solder, one round ($(left) s left)"
mc=$(( $(left) - 2 ))
if [ "$DRY" = 1 ] || [ "$mc" -gt 24 ]; then
  OUT=/tmp/mc2 DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=1 PEER_ARGS="--reps 50 --flex-configs $FLEX_CONFIGS" \
    DEADLINE=$(( mc + 55 )) SPOTS=bench/attn_s1k/flex.spots timeout "$mc" bash bench/merged_call.sh
  [ "$DRY" = 1 ] || { tar czf "$O/flex.tgz" -C /tmp/mc2 r; grep -E "alibi|diff_attn" /tmp/mc2/r/summary.md 2>/dev/null | head; }
else stamp "   deadline: Flex not measured"; fi
stamp "== done ($(left) s left)"
