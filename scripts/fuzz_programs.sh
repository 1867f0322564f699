#!/usr/bin/env bash
# The long run of the random-valid-program fuzzer (tests/unit/e2e/fusion_random_test.cpp,
# ProgramRandomLong): COUNT programs from FIRST_SEED, each run unfused and fused on the CPU executor
# and compared with the float64 reference. Prints the counts of passes, crashes (the test process died
# on a program: the script restarts after it), internal errors, wrong answers and invalid programs
# (a generator bug), and the seeds of every failure; details go to OUT_DIR/details.txt.
#
#   scripts/fuzz_programs.sh [COUNT=10000] [FIRST_SEED=1]
#   env: BUILD (default build), OUT_DIR (default build/fuzz-programs), BATCH (programs per process, 200),
#        TIMEOUT (seconds per batch, 600), SOLDER_THREADS (cores the executor uses; 1 by default here)
set -uo pipefail
count=${1:-10000}
first=${2:-1}
build=${BUILD:-build}
out=${OUT_DIR:-$build/fuzz-programs}
batch=${BATCH:-200}
batch_timeout=${TIMEOUT:-600}
export SOLDER_THREADS=${SOLDER_THREADS:-1}
binary=$build/solder_unit_tests
[[ -x $binary ]] || { echo "error: $binary not found (build solder_unit_tests first)" >&2; exit 2; }
mkdir -p "$out"
: > "$out/details.txt"
: > "$out/results.txt"

declare -A counts=([ill_conditioned]=0 [pass]=0 [crash]=0 [internal_error]=0 [wrong]=0 [invalid_program]=0 [timeout]=0)
failures=""
seed=$first
end=$((first + count))
start_time=$(date +%s)
while (( seed < end )); do
  n=$(( end - seed < batch ? end - seed : batch ))
  log="$out/batch.log"
  SOLDER_PROGRAM_RANDOM_FIRST_SEED=$seed SOLDER_PROGRAM_RANDOM_COUNT=$n timeout "$batch_timeout" \
    taskset -c 0 "$binary" --gtest_also_run_disabled_tests --gtest_filter='ProgramRandomLong.*' > "$log" 2>&1
  status=$?
  last_done=$((seed - 1))
  while read -r word s kind; do
    if [[ $word == result ]]; then
      counts[$kind]=$(( counts[$kind] + 1 ))
      echo "$s $kind" >> "$out/results.txt"
      [[ $kind != pass ]] && failures+=" $s($kind)"
      last_done=$s
    fi
  done < <(grep -E '^result ' "$log")
  awk '/^detail /,/^end detail/' "$log" >> "$out/details.txt"
  if (( last_done < seed + n - 1 )); then
    # the process died (or timed out) on the program after the last result
    bad=$((last_done + 1))
    kind=crash
    (( status == 124 )) && kind=timeout
    counts[$kind]=$(( counts[$kind] + 1 ))
    failures+=" $bad($kind)"
    echo "$bad $kind" >> "$out/results.txt"
    { echo "detail $bad ($kind, exit status $status)"; sed -n "/^start $bad\$/,\$p" "$log" | tail -40; echo "end detail"; } >> "$out/details.txt"
    seed=$((bad + 1))
  else
    seed=$((seed + n))
  fi
  done_count=$((seed - first))
  printf '\r%d/%d programs, %d s: %d passed, %d crashed, %d internal errors, %d wrong' "$done_count" "$count" \
    $(( $(date +%s) - start_time )) "${counts[pass]}" "${counts[crash]}" "${counts[internal_error]}" "${counts[wrong]}" >&2
done
echo >&2
echo "random valid programs: seeds $first..$((end - 1)) ($count programs, $(( $(date +%s) - start_time )) s)"
for k in pass ill_conditioned crash internal_error wrong invalid_program timeout; do printf '  %-16s %d\n' "$k" "${counts[$k]}"; done
[[ -n $failures ]] && echo "failures (seed(kind)):$failures" && echo "details: $out/details.txt"
bad=$(( counts[crash] + counts[internal_error] + counts[wrong] + counts[invalid_program] + counts[timeout] ))
exit $(( bad > 0 ? 1 : 0 ))
