#!/usr/bin/env bash
# evo128's device call (issue 17, twentieth session), a wrapper around bench/merged_call.sh, from the root
# bench/big_gemm/stage.sh stages with this folder's spots and checks (CuTe headers in ../cutlass, the kernels
# compiled ahead in kernels.tar.xz):
#   cd .devcarry/evo128 && LIMIT=124 bash bench/evo128/call.sh          (DRY_RUN=1: the commands, no GPU)
#   1. (before any timing, together) the attention skeleton's device test filtered by DT_FILTER (default
#      "staged": every staged-bias case, the 128-key ones among them) under DT_SECONDS (default 45), and
#      `solder run --backend cuda` (float64 reference) of each line of VERIFY_FILE (default
#      bench/evo128/verify.txt: ENV words or -, then the run's arguments), 3 at a time, each under
#      VERIFY_SECONDS (default 50): dt-attention.txt, verify.txt, verify-N.txt into $OUT/checks.tgz;
#   2. bench/merged_call.sh with SPOTS (default bench/evo128/ab.spots), ROUNDS (default 2) interleaved rounds,
#      FlexAttention at its fixed tile (FLEX_CONFIGS, peers.py --flex-configs), the SM clock logged, under
#      MC_SECONDS (default 80), into $OUT/r.tgz;
#   3. ncu of NCU_CELLS (default: evoformer B1 on each tile; CASE@KNOB=VALUE sets one knob), one ncu process
#      per cell, --clock-control none, bench/attention/dossier_call.sh's sections and metrics, a cell only with
#      NCU_MIN_LEFT (default 12) s of LIMIT left, into $OUT/ncu.tgz.
# $OUT: checks.tgz, r.tgz, ncu.tgz, call.log.
. bench/call_prologue.sh
SPOTS=${SPOTS:-bench/evo128/ab.spots}; VERIFY_FILE=${VERIFY_FILE:-bench/evo128/verify.txt}
FLEX_CONFIGS=${FLEX_CONFIGS:-64:128x64w4s3}
NCU_CELLS=${NCU_CELLS-evoformer-b1-d64 evoformer-b1-d64@SOLDER_ATTN_BIAS_BN=64}

C=/tmp/evo128-checks; rm -rf "$C"; mkdir -p "$C"
stamp "== 1. checks: device test '${DT_FILTER:=staged}', verify $VERIFY_FILE ($(left) s left)"
if [ "$DRY" = 1 ]; then echo "timeout ${DT_SECONDS:-45} bin/test_sm90_attention 2026 '$DT_FILTER' > dt-attention.txt &"
else (timeout "${DT_SECONDS:-45}" bin/test_sm90_attention 2026 "$DT_FILTER" > "$C/dt-attention.txt" 2>&1; echo "rc $?" >> "$C/dt-attention.txt") &
  dt_pid=$!; fi
n=0
while read -r envs args; do
  n=$((n + 1)); [ "$envs" = - ] && envs=
  echo "env $envs timeout ${VERIFY_SECONDS:-50} build/solder run --backend cuda $args" > "$C/verify-$n.sh"
done < <(grep -v '^\s*\(#\|$\)' "$VERIFY_FILE")
if [ "$DRY" = 1 ]; then cat "$C"/verify-*.sh
else
  ls "$C"/verify-*.sh | xargs -P 3 -n 1 bash -c 'if bash "$0" > "${0%.sh}.txt" 2>&1; then echo "verified $(basename "$0"): $(cat "$0") $(grep -o "rel[^,;]*err[^,;]*" "${0%.sh}.txt" | head -2 | tr "\n" " ")";
    else echo "FAILED ($?) $(basename "$0"): $(cat "$0")"; fi' | tee -a "$C/verify.txt"
  wait "$dt_pid"
  stamp "   device test: $(grep -c '^OK ' "$C/dt-attention.txt") OK, $(grep -c '^FAIL' "$C/dt-attention.txt") FAIL; $(tail -n2 "$C/dt-attention.txt" | tr '\n' ' ')"
  tar czf "$O/checks.tgz" -C "$C" .
fi

stamp "== 2. rounds: merged_call.sh $SPOTS, Flex at $FLEX_CONFIGS ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left, a peers step with 30: its DEADLINE
# is what this call keeps for the rounds (MC_SECONDS) + 55, under an outer timeout of MC_SECONDS
mc=${MC_SECONDS:-80}; [ "$DRY" != 1 ] && [ "$mc" -gt $(( $(left) - 4 )) ] && mc=$(( $(left) - 4 ))
OUT=/tmp/mc DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} \
  PEER_ARGS="--reps 50 --flex-configs '$FLEX_CONFIGS'" DEADLINE=$(( mc + 55 )) SPOTS=$SPOTS timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/r.tgz" -C /tmp/mc r; cat /tmp/mc/r/summary.md 2>/dev/null | head -40; }

stamp "== 3. ncu ($(left) s left)"
W=/tmp/evo128-ncu; rm -rf "$W"; mkdir -p "$W"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for cell in $NCU_CELLS; do
  if [ "$DRY" != 1 ] && [ "$(left)" -lt "${NCU_MIN_LEFT:-12}" ]; then stamp "   deadline: $cell and the rest not profiled"; break; fi
  t=$(( $(left) - 2 )); [ "$t" -gt 30 ] && t=30
  id=${cell%%@*}; knob=; [ "$id" != "$cell" ] && knob=${cell#*@}
  name=${cell//[:@=]/-}
  args=$(python3 bench/suites.py --suite all --cases "^$id\$" --solder-commands --out /dev/null | sed 's/^.* bench //; s/ --json.*//')
  cmd="env $knob ncu --clock-control none --target-processes application-only --kernel-name regex:fused|_kernel --launch-count 1
    $SECTIONS --metrics $METRICS --page raw --csv --log-file $W/$name.csv build/solder bench $args --replays 1 --calls-per-replay 1"
  if [ "$DRY" = 1 ]; then echo "timeout $t $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout "$t" $cmd > "$W/$name.out" 2>&1
  stamp "   $cell rc $? ($(grep -c '^"' "$W/$name.csv" 2>/dev/null) CSV lines)"
  tar czf "$O/ncu.tgz" -C "$W" .
done
stamp "== done ($(left) s left)"
