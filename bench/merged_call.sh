#!/usr/bin/env bash
# The A/B call driver: one device call from a SPOTS file, run on the device from a mini repository root
# carried there (build/solder and bin/test_sm90_* built on the build machine, examples/, bench/, tests/gpu/,
# COMMIT; bench/merged_stage.sh stages it), with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=440 SPOTS=bench/merged_s11.spots bash bench/merged_call.sh
#   DRY_RUN=1 SPOTS=... bash bench/merged_call.sh      (no GPU: prints every command, runs none; bench/README.md)
#
#   1. device tests: DEVICE_TESTS, "name:seconds[:arg]" words, each running bin/test_sm90_<name> 2026 [arg]
#      (unset: all seven, no argument; attention gets 420 s: its 2774 cases took 272 s on an H200, and 2417 of
#      its 2900 fitted in 300 s in the twenty-second session;
#      DEVICE_TESTS="" runs none), every output line stamped with its second since the start;
#   2. tests/gpu/run.sh (RUN_SH=0 skips it): every example at small and paper sizes through --backend cuda
#      against the float64 reference;
#   2b. VERIFY (a regular expression on bench/suites.py case ids; unset: none): `solder run --backend cuda` of
#      each such case at its suite size against the float64 reference, 4 at a time, each under
#      VERIFY_TIMEOUT seconds (default 120; a timeout shows as FAILED (124)), into r/verify.txt;
#   3. the spot checks in the SPOTS file, one per line, fields separated by blanks ("-" for none):
#        TAG SUITE CASES PEERS PEER-SECONDS [ENV=V ...]
#      Solder's records go to r/solder.jsonl (TAG "-") or r/solder-TAG.jsonl, with the ENV words (knobs
#      such as SOLDER_GEMM_TILE=...) prefixed to the line's solder commands; then the lines' PEERS
#      (comma-separated names of bench/peers.py), measured in this call into r/peers.jsonl; PEER_ARGS adds
#      arguments to every peers.py call (e.g. --compile-mode default). Every solder kernel of the
#      spots compiles in parallel while the device tests run. A solder step starts only with 60 s left, a
#      peers step with 30 s.
#      ROUNDS=N (default 1) runs the steps N times: a round is every line's solder commands (one step per
#      case, in the file's order) then every line's peers (one step per line); each round runs the steps
#      in the reverse order of the round before (A/B interleaved: S1 S2 P1 P2, P2 P1 S2 S1, ...). Every
#      Solder and peer record gets "round": K and "span": [start, end] (epoch seconds of its step); the
#      plan is r/plan.tsv (round, S or P, records file, command), each step's times and exit status
#      r/steps.tsv. The SM clock, memory clock, power, temperature and clock-event reasons are sampled
#      every 100 ms during the steps into r/clocks.csv (nvidia-smi; its first line maps the device's local
#      time stamps to epoch seconds).
#   4. the table (bench/merged_table.py: per round, the median of the rounds' medians, the fastest replay,
#      the SM clock, each cell's ratio to its target peer) into r/summary.md; r.tgz and run.tgz come back
#      under $OUT.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
DRY=${DRY_RUN:-0}
ROUNDS=${ROUNDS:-1}
case "$ROUNDS" in ''|*[!0-9]*|0) echo "merged_call: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2;; esac
SPOTS=${SPOTS:?SPOTS names the spot-check file}
[ -f "$SPOTS" ] || { echo "merged_call: no spots file $SPOTS" >&2; exit 2; }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export SOLDER_COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null)
start=$(date +%s); left() { echo $(( ${DEADLINE:-440} - ($(date +%s) - start) )); }
# dry: what a command would be, printed (DRY_RUN=1), or nothing
dry() { [ "$DRY" = 1 ] && printf '%s\n' "$*"; [ "$DRY" = 1 ]; }
# pack: r/ into $O/r.tgz now, and again after every later phase and step, so that a call cut short (an
# outer timeout, the device tool's limit) still brings back what ran: the tool returns at most 8 files
# of $OUT, and r.tgz sorts before the loose r/ files
pack() { [ "$DRY" = 1 ] || tar czf $O/r.tgz -C $O r 2>/dev/null; }
dry "# merged_call dry run: SPOTS=$SPOTS ROUNDS=$ROUNDS DEADLINE=${DEADLINE:-440} OUT=$O" ||
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
spots() { grep -v '^\s*\(#\|$\)' "$SPOTS"; }
# the staged binaries come xz-compressed (bench/merged_stage.sh): unpack them once, beside their .xz
[ "$DRY" = 1 ] || bash bench/unpack_staged.sh
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# solder_cmds ARGS...: every spot's solder command lines, each prefixed with its ENV words
solder_cmds() {
  spots | while read -r tag suite cases peers plimit envs; do
    out=$O/r/solder-$tag.jsonl; [ "$tag" = "-" ] && out=$O/r/solder.jsonl
    python3 bench/suites.py --suite "$suite" --cases "$cases" --solder-commands "$@" --out "$out" 2>/dev/null |
      sed "s|^|${envs:+$envs }|"
  done
}

# plan_round K: round K's steps, one a line: K, S or P, the records file under r/, the command. A solder
# step is one case's `solder bench` (its ENV words first), a peers step one line's bench/peers.py; both
# write r/step.jsonl, whose records go to the records file tagged with the round and the step's span.
plan_round() {
  local k=$1
  {
    spots | while read -r tag suite cases peers plimit envs; do
      dest=solder-$tag.jsonl; [ "$tag" = "-" ] && dest=solder.jsonl
      python3 bench/suites.py --suite "$suite" --cases "$cases" --solder-commands --timeout 30 \
        --out "$O/r/step.jsonl" 2>/dev/null | while IFS= read -r c; do printf '%s\tS\t%s\t%s\n' "$k" "$dest" "${envs:+$envs }$c"; done
    done
    spots | while read -r tag suite cases peers plimit envs; do
      [ "$peers" = "-" ] && continue
      printf "%s\tP\tpeers.jsonl\tpython3 bench/peers.py --no-ceilings --out $O/r/step.jsonl --suite %s --cases '%s' --peers %s --time-limit %s%s\n" \
        "$k" "$suite" "$cases" "$peers" "$plimit" "${PEER_ARGS:+ $PEER_ARGS}"
    done
  } | if [ $((k % 2)) = 0 ]; then tac; else cat; fi
}
for k in $(seq 1 "$ROUNDS"); do plan_round "$k"; done > $O/r/plan.tsv
[ -s $O/r/plan.tsv ] || echo "merged_call: $SPOTS gives no step (no line, or no case matches its regular expressions)" >&2

if [ "$DRY" = 1 ]; then
  echo "== 0. compile every spot's kernels, 8 at a time"
  solder_cmds --compile-only --timeout 120
else
  solder_cmds --compile-only --timeout 120 | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &
fi

echo "== 1. device tests"
for t in ${DEVICE_TESTS-attention:420 attention_dual:40 gemm:150 gemm_ranges:40 gemm_rows:40 gemm_prologue:60 chain:30}; do
  IFS=: read -r n s arg <<< "$t"; f=$n${arg:+-$arg}
  dry "timeout $s bin/test_sm90_$n 2026${arg:+ $arg} > r/dt-$f.txt" && continue
  # each line stamped with the seconds since the test started (stdout line-buffered), so slow cases show
  t0=$EPOCHREALTIME
  timeout $s stdbuf -oL bin/test_sm90_$n 2026 $arg 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done |
    awk -v t0="$t0" '{ t = $1; sub(/^[^ ]* /, ""); printf "%7.2f %s\n", t - t0, $0 }' > $O/r/dt-$f.txt
  rc=${PIPESTATUS[0]}
  echo "   $f rc $rc $(tail -n1 $O/r/dt-$f.txt) ($(( $(date +%s) - start )) s)"
done
[ "$DRY" = 1 ] || grep -h "^ *[0-9.]* FAIL" $O/r/dt-*.txt 2>/dev/null | head -5
pack
if [ "${RUN_SH:-1}" = 1 ]; then
  echo "== 2. tests/gpu/run.sh ($(left) s left)"
  if ! dry "SOLDER_REBUILD=0 SOLDER_GPU_PARALLEL=8 timeout <left - ${SPOT_SECONDS:-250}> bash tests/gpu/run.sh $O/run > r/run-summary.txt"; then
    SOLDER_REBUILD=0 SOLDER_GPU_PARALLEL=8 timeout $(( $(left) - ${SPOT_SECONDS:-250} )) bash tests/gpu/run.sh $O/run \
      > $O/r/run-summary.txt 2>&1
    echo "   rc $?"; grep -E "MISMATCH|ERROR" $O/r/run-summary.txt | head; tail -n1 $O/r/run-summary.txt
  fi
fi
pack
if [ -n "${VERIFY:-}" ]; then
  echo "== 2b. verify at the suites' sizes ($(left) s left)"
  if [ "$DRY" = 1 ]; then
    python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout ${VERIFY_TIMEOUT:-120}
  else
    python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout ${VERIFY_TIMEOUT:-120} |
      xargs -d '\n' -P 4 -I{} sh -c '{} > /dev/null 2>&1 && echo "verified {}" || echo "FAILED ($?) {}"' > $O/r/verify.txt
    echo "   $(grep -c ^verified $O/r/verify.txt) of $(wc -l < $O/r/verify.txt) verified"; grep ^FAILED $O/r/verify.txt | head
  fi
fi
wait
pack

echo "== 3. spot checks, $ROUNDS round(s) ($(left) s left)"
if [ "$DRY" = 1 ]; then
  echo "clock log: nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > r/clocks.csv"
  while IFS=$'\t' read -r k kind dest cmd; do
    if [ "$kind" = S ]; then printf 'round %s solder -> r/%s: %s\n' "$k" "$dest" "$cmd"
    else printf 'round %s peers -> r/%s: PYTHONUNBUFFERED=1 timeout <left - 5> %s\n' "$k" "$dest" "$cmd"; fi
  done < $O/r/plan.tsv
  echo "== 4. python3 bench/merged_table.py $O/r > $O/r/summary.md"
  exit 0
fi
# the clock log: nvidia-smi's time stamps are the device's local time; the first line maps them to epoch seconds
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 ||
  fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
echo "# ref $(date '+%s.%N %Y/%m/%d %H:%M:%S.%N') $fields" > $O/r/clocks.csv
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 >> $O/r/clocks.csv 2>&1 &
clock_pid=$!
: > $O/r/steps.tsv
while IFS=$'\t' read -r k kind dest cmd; do
  if [ "$kind" = S ] && [ "$(left)" -lt 60 ]; then echo "   deadline before round $k: $cmd"; continue; fi
  if [ "$kind" = P ] && [ "$(left)" -lt 30 ]; then echo "   deadline before round $k peers: $cmd"; continue; fi
  rm -f $O/r/step.jsonl
  t0=$(date +%s.%N)
  if [ "$kind" = S ]; then
    sh -c "$cmd" 2>> $O/r/solder.err < /dev/null
  else
    PYTHONUNBUFFERED=1 timeout $(( $(left) - 5 )) sh -c "exec $cmd" >> $O/r/peers.log 2>&1 < /dev/null
  fi
  rc=$?; t1=$(date +%s.%N)
  # every record of the step (one JSON object a line) tagged with its round and the step's span
  [ -f $O/r/step.jsonl ] && sed "s/}[[:space:]]*\$/, \"round\": $k, \"span\": [$t0, $t1]}/" $O/r/step.jsonl >> $O/r/$dest
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$k" "$kind" "$dest" "$t0" "$t1" "$rc" "$cmd" >> $O/r/steps.tsv
  [ "$kind" = P ] && echo "   round $k peers rc $rc ($(left) s left): ${cmd#*--suite }"
  pack
done < $O/r/plan.tsv
kill $clock_pid 2>/dev/null
echo "   solder records $(cat $O/r/solder*.jsonl 2>/dev/null | wc -l) of $(cut -f2 $O/r/plan.tsv | grep -c S)"

python3 bench/merged_table.py $O/r | tee $O/r/summary.md
tar czf $O/run.tgz -C $O run 2>/dev/null; tar czf $O/r.tgz -C $O r
echo "== done ($(left) s left)"
