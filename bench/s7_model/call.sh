#!/usr/bin/env bash
# s7-model's device call (issue 15, twentieth session), from a root staged by bench/big_gemm/stage.sh (CuTe
# headers in ../cutlass, every spot's kernels compiled ahead in kernels.tar.xz):
#   cd .devcarry/s7-model && SPOTS=bench/s7_model/call.spots NCU_CELLS="..." LIMIT=124 bash bench/s7_model/call.sh
#   1. ncu first (the call's purpose): one ncu process per word of NCU_CELLS (a case id of bench/suites.py,
#      or CASE@KNOB=VALUE with one knob, e.g. ffn-S7@SOLDER_GEMM_TILE=64x128s8k2@128,2560,9728), every kernel
#      of the program in one `solder bench --replays 1 --calls-per-replay 1`, --clock-control none, the
#      SpeedOfLight, memory, warp-state, scheduler, compute, occupancy and launch sections plus
#      bench/big_gemm/call.sh's metrics, as CSV into ncu/CELL.csv; no cell starts after NCU_SECONDS
#      (default 55) from the start; packed into $OUT/ncu.tgz after every cell;
#   2. bench/merged_call.sh with SPOTS, ROUNDS (default 2) interleaved rounds, torch.compile default mode,
#      no device tests or run.sh, until LIMIT - 3 s, into $OUT/r.tgz.
# $OUT: ncu.tgz, r.tgz, call.log. DRY_RUN=1 prints the commands.
. bench/call_prologue.sh

stamp "== 1. ncu ($(left) s left)"
W=/tmp/s7-model-ncu; rm -rf "$W"; mkdir -p "$W"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,\
lts__t_sector_hit_rate.pct,lts__t_bytes.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,\
lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg
for cell in ${NCU_CELLS:-}; do
  if [ "$DRY" != 1 ] && [ $(( $(date +%s) - start )) -ge "${NCU_SECONDS:-55}" ]; then stamp "   ncu budget spent: $cell and the rest not profiled"; break; fi
  name=${cell//[:@=,]/-}
  id=${cell%%@*}; knob=; [ "$id" != "$cell" ] && knob=${cell#*@}
  args=$(python3 bench/suites.py --suite all --cases "^$id\$" --solder-commands --out /dev/null | sed 's/^.* bench //; s/ --json.*//')
  kernels=$(env $knob build/solder emit --cuda $args 2>/dev/null | grep -c '^// ---- kernel ')
  [ "$kernels" -ge 1 ] 2>/dev/null || kernels=1
  cmd="env $knob ncu --clock-control none --target-processes application-only --kernel-name regex:fused|_kernel --launch-count $kernels
    $SECTIONS --metrics $METRICS --page raw --csv --log-file $W/$name.csv
    build/solder bench $args --replays 1 --calls-per-replay 1"
  if [ "$DRY" = 1 ]; then echo "timeout 30 $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout 30 $cmd > "$W/$name.out" 2>&1
  stamp "   $cell rc $? ($(grep -c '^"' "$W/$name.csv" 2>/dev/null) CSV lines)"
  tar czf "$O/ncu.tgz" -C "$W" .
done

mc=$(( $(left) - 3 ))
stamp "== 2. rounds: merged_call.sh $SPOTS ($mc s)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left, a peers step with 30: its DEADLINE is
# the seconds kept for the rounds + 55, under an outer timeout of those seconds
OUT=/tmp/mc DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} \
  PEER_ARGS="--compile-mode default" DEADLINE=$(( mc + 55 )) SPOTS=$SPOTS timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { [ -f /tmp/mc/r.tgz ] && cp /tmp/mc/r.tgz "$O/r.tgz"; cat /tmp/mc/r/summary.md 2>/dev/null | head -60; }
stamp "== done ($(left) s left)"
