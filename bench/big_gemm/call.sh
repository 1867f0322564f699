#!/usr/bin/env bash
# big-gemm's device call (issue 15, nineteenth session), a wrapper around bench/merged_call.sh, from the root
# bench/big_gemm/stage.sh stages (CuTe headers in ../cutlass, the spots' kernels compiled ahead in
# kernels.tar.xz):
#   cd .devcarry/big-gemm && SPOTS=bench/big_gemm/call1.spots LIMIT=124 bash bench/big_gemm/call.sh
#   1. (before any timing, together) the GEMM device test bin/test_sm90_gemm once per comma-separated word
#      of DT_FILTER (its GEMM_TEST_FILTER; unset: no device test), each under DT_SECONDS (default 40), and `solder run --backend
#      cuda` (float64 reference) of each line of VERIFY_FILE (ENV words or -, then the run's arguments),
#      3 at a time, each under VERIFY_SECONDS (default 60): dt-gemm.txt, verify.txt and verify-N.txt in
#      $OUT/checks.tgz;
#   2. bench/merged_call.sh with SPOTS, ROUNDS (default 3) interleaved rounds, no device tests or run.sh, the
#      SM clock logged through the steps, into $OUT/r.tgz (packed after every step);
#   3. ncu of NCU_CELLS (case ids; a word CASE:PEER profiles that peer of bench/peers.py through
#      bench/attention/dossier_peer_ncu.py, torch.compile in PEER_MODE, default `default`): one ncu process per
#      cell, --clock-control none, the sections and metrics of bench/attention/dossier_call.sh, CSV into
#      ncu/CELL.csv; a cell starts only with NCU_MIN_LEFT (default 12) s of LIMIT left; packed into
#      $OUT/ncu.tgz after every cell. A Solder cell's ENV words: CELL@KNOB=VALUE (one knob).
# $OUT: checks.tgz, r.tgz, ncu.tgz, call.log. DRY_RUN=1 prints the commands.
. bench/call_prologue.sh

C=/tmp/big-gemm-checks; rm -rf "$C"; mkdir -p "$C"
if [ -n "${DT_FILTER:-}" ] || [ -n "${VERIFY_FILE:-}" ]; then
  stamp "== 1. checks: device test '${DT_FILTER:-}', verify ${VERIFY_FILE:-none} ($(left) s left)"
  if [ -n "${DT_FILTER:-}" ]; then
    if [ "$DRY" = 1 ]; then echo "GEMM_TEST_FILTER='$DT_FILTER' timeout ${DT_SECONDS:-40} bin/test_sm90_gemm 2026 > dt-gemm.txt"
    else (IFS=,; for f in $DT_FILTER; do GEMM_TEST_FILTER="$f" timeout "${DT_SECONDS:-40}" bin/test_sm90_gemm 2026 >> "$C/dt-gemm.txt" 2>&1;
            echo "rc $? (filter '$f')" >> "$C/dt-gemm.txt"; done) &
      dt_pid=$!; fi
  fi
  if [ -n "${VERIFY_FILE:-}" ]; then
    n=0
    while read -r envs args; do
      n=$((n + 1)); [ "$envs" = - ] && envs=
      echo "env $envs timeout ${VERIFY_SECONDS:-60} build/solder run --backend cuda $args" > "$C/verify-$n.sh"
    done < <(grep -v '^\s*\(#\|$\)' "$VERIFY_FILE")
    if [ "$DRY" = 1 ]; then cat "$C"/verify-*.sh
    else
      ls "$C"/verify-*.sh | xargs -P 3 -n 1 bash -c 'if bash "$0" > "${0%.sh}.txt" 2>&1; then echo "verified $(basename "$0"): $(cat "$0")";
        else echo "FAILED ($?) $(basename "$0"): $(cat "$0")"; fi' | tee -a "$C/verify.txt"
    fi
  fi
  [ -n "${dt_pid:-}" ] && wait "$dt_pid"
  if [ "$DRY" != 1 ]; then
    stamp "   device test: $(grep -c '^PASS' "$C/dt-gemm.txt" 2>/dev/null) passed, $(grep -c '^FAIL' "$C/dt-gemm.txt" 2>/dev/null) failed, $(tail -1 "$C/dt-gemm.txt" 2>/dev/null)"
    tar czf "$O/checks.tgz" -C "$C" .
  fi
fi

stamp "== 2. rounds: merged_call.sh $SPOTS ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left, a peers step with 30: its DEADLINE
# is what this call keeps for the rounds (MC_SECONDS) + 55, under an outer timeout of MC_SECONDS
mc=${MC_SECONDS:-80}
OUT=/tmp/mc DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-3} \
  PEER_ARGS="--compile-mode default --reps 50" DEADLINE=$(( mc + 55 )) SPOTS=$SPOTS timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/r.tgz" -C /tmp/mc r; cat /tmp/mc/r/summary.md 2>/dev/null | head -60; }

stamp "== 3. ncu ($(left) s left)"
W=/tmp/big-gemm-ncu; rm -rf "$W"; mkdir -p "$W"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,\
lts__t_sector_hit_rate.pct,lts__t_bytes.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max
for cell in ${NCU_CELLS:-}; do
  if [ "$DRY" != 1 ] && [ "$(left)" -lt "${NCU_MIN_LEFT:-12}" ]; then stamp "   deadline: $cell and the rest not profiled"; break; fi
  t=$(( $(left) - 2 )); [ "$t" -gt 40 ] && t=40
  name=${cell//[:@=]/-}
  case "$cell" in
  *:*)   # a peer's kernels: one profiled call after the warm-up
    cmd="ncu --clock-control none --target-processes application-only --profile-from-start off $SECTIONS --metrics $METRICS
      --page raw --csv --log-file $W/$name.csv python3 bench/attention/dossier_peer_ncu.py --cells $cell
      --compile-mode ${PEER_MODE:-default} --deadline $(( start + LIMIT - 3 )) --flex-seconds 20" ;;
  *)     # Solder's kernels: one call of `solder bench --replays 1`, every kernel of the program
    id=${cell%%@*}; knob=; [ "$id" != "$cell" ] && knob=${cell#*@}
    args=$(python3 bench/suites.py --suite all --cases "^$id\$" --solder-commands --out /dev/null | sed 's/^.* bench //; s/ --json.*//')
    kernels=$(env $knob build/solder emit --cuda $args 2>/dev/null | grep -c '^// ---- kernel ')
    [ "$kernels" -ge 1 ] 2>/dev/null || kernels=1
    cmd="env $knob ncu --clock-control none --target-processes application-only --kernel-name regex:fused|_kernel --launch-count $kernels
      $SECTIONS --metrics $METRICS --page raw --csv --log-file $W/$name.csv
      build/solder bench $args --replays 1 --calls-per-replay 1" ;;
  esac
  if [ "$DRY" = 1 ]; then echo "timeout $t $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout "$t" $cmd > "$W/$name.out" 2>&1
  stamp "   $cell rc $? ($(grep -c '^"' "$W/$name.csv" 2>/dev/null) CSV lines)"
  tar czf "$O/ncu.tgz" -C "$W" .
done
stamp "== done ($(left) s left)"
