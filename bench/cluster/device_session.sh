#!/usr/bin/env bash
# One device run for the cluster collectives (issue #6), on one H100, in about 4 minutes of wall time (session 4
# as session4_device.sh; session 5 added the cf step and the STEPS / TABLE_TRANSPORTS choices).
# Everything goes under RESULTS (the first argument); stdout is a short summary printed as each step ends.
#   0. build (nvcc, in parallel): test_collectives, bench_collectives, bench_cf_config, trace_round
#      (-DSOLDER_CLUSTER_TRACE=1), test_channels, launch_floor
#   1. trace      trace_round: per-phase cycles of one round, reduce 8/32/128 KB and gather 32/128 KB at C = 4,
#                 transports store_async and direct (trace.md, trace.csv)
#   cf            bench_cf_config: ClusterFusion Table 1 in ClusterFusion's own configuration (32 clusters x 4
#                 blocks x 128 threads, 1-8 KB tiles), direct then store_async (cf-*.md)
#   2. table      bench_collectives, ClusterFusion Table 1 rows (reduce and gather 8-256 KB per block, in kernel
#                 and per launch, DSM vs global memory), 256 threads, for each of TABLE_TRANSPORTS (default
#                 "store_async direct") (table-*.md)
#   3. checks     in parallel: the device tests, all of them, with store_async and with direct; the subset with
#                 bulk_copy; compute-sanitizer racecheck and memcheck on the subset (each collective at C = 4,
#                 all-reduce and gather at C = 2 and 8, tiny slots, global tiles, repeated calls) with
#                 store_async and with direct (tests-*.log, sanitizer-*.log)
#   channel      the channel device tests (test_channels: reduce_channel and gather_channel, every compiled shape, dtype, op and
#                variant), then compute-sanitizer racecheck and memcheck on its subset, in parallel
#                (channel-tests.log, channel-racecheck.log, channel-memcheck.log)
#   floor        launch_floor: per-launch time of ClusterFusion's grid with one ingredient of a collective
#                kernel's setup and teardown at a time (launch-floor.md)
#   4. dsm        bench_collectives: launch floor, cluster-size sweep (store_async and direct), DSM pull/push
#                 bandwidth and latency table (dsm.md, dsm-table.json)
# Each step runs under `timeout`, capped so that the whole run ends by BUDGET seconds (default 235); a step
# with no time left is skipped and says so. Exit status: non-zero when a build, test or sanitizer step failed.
# Usage: bash bench/cluster/device_session.sh RESULTS   (env: CUDA=/usr/local/cuda, BIN=build-cluster/session,
#        COMMIT=<hash recorded in the tables>, BUDGET=235, STEPS="trace cf table checks channel floor dsm" to pick steps,
#        TABLE_TRANSPORTS="store_async direct")
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
RESULTS=${1:-$ROOT/build-cluster/session4-results}
BIN=${BIN:-$ROOT/build-cluster/session}
STEPS=" ${STEPS:-trace cf table checks channel floor dsm} "
TABLE_TRANSPORTS=${TABLE_TRANSPORTS:-store_async direct}
wants() { [[ "$STEPS" == *" $1 "* ]]; }
BUDGET=${BUDGET:-235}
COMMIT=${COMMIT:-${SOLDER_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}}
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
SANITIZER="$CUDA/bin/compute-sanitizer"
mkdir -p "$RESULTS" "$BIN"
cd "$ROOT"
status=0

# Seconds a step may take: its own limit, or what is left of the budget (0: skip).
limit() { local left=$((BUDGET - SECONDS)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 0)) || echo "$1"; }
# step NAME LIMIT LOG COMMAND...: runs COMMAND under timeout with its output in LOG; prints one line.
step() {
  local name=$1 want=$2 log=$3; shift 3
  local t=$(limit "$want") t0=$SECONDS
  if [ "$t" -eq 0 ]; then echo "== $name: SKIPPED (time budget spent at ${SECONDS} s)"; return 99; fi
  timeout "$t" "$@" >"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc$([ $rc -eq 124 ] && echo ' (TIMED OUT)'), $((SECONDS - t0)) s (at ${SECONDS} s)"
  return $rc
}

echo "device_session.sh: commit $COMMIT, steps$STEPS, results in $RESULTS"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$RESULTS/gpu.txt"

# ---- 0. build ----------------------------------------------------------------------------------------------
echo "== build (6 nvcc in parallel)"
timeout 150 $NVCC bench/cluster/bench_cf_config.cu -o "$BIN/bench_cf_config" >"$RESULTS/build-cf.log" 2>&1 &
build_cf=$!
timeout 150 $NVCC tests/gpu/cluster/test_collectives.cu -o "$BIN/test_collectives" >"$RESULTS/build-tests.log" 2>&1 &
build_tests=$!
timeout 150 $NVCC bench/cluster/bench_collectives.cu -o "$BIN/bench_collectives" >"$RESULTS/build-bench.log" 2>&1 &
build_bench=$!
timeout 150 $NVCC -DSOLDER_CLUSTER_TRACE=1 bench/cluster/trace_round.cu -o "$BIN/trace_round" >"$RESULTS/build-trace.log" 2>&1 &
build_trace=$!
timeout 200 $NVCC tests/gpu/cluster/test_channels.cu -o "$BIN/test_channels" >"$RESULTS/build-channel.log" 2>&1 &
build_channel=$!
timeout 150 $NVCC bench/cluster/launch_floor.cu -o "$BIN/launch_floor" >"$RESULTS/build-floor.log" 2>&1 &
build_floor=$!
built() {  # pid name log
  if wait "$1"; then echo "built $2"; return 0; fi
  echo "BUILD FAILED: $2"; tail -15 "$3"; status=1; return 1
}
built $build_trace trace_round "$RESULTS/build-trace.log"; have_trace=$?
built $build_bench bench_collectives "$RESULTS/build-bench.log"; have_bench=$?
built $build_tests test_collectives "$RESULTS/build-tests.log"; have_tests=$?
built $build_cf bench_cf_config "$RESULTS/build-cf.log"; have_cf=$?
built $build_channel test_channels "$RESULTS/build-channel.log"; have_channel=$?
built $build_floor launch_floor "$RESULTS/build-floor.log"; have_floor=$?
echo "build done at ${SECONDS} s"

# ---- 1. trace ----------------------------------------------------------------------------------------------
if [ $have_trace -eq 0 ] && wants trace; then
  step "1. trace (trace_round)" 40 "$RESULTS/trace.md" "$BIN/trace_round" --csv "$RESULTS/trace.csv"
  # Summary: per case, the cycles per call of each block.
  grep -E "^## |cycles per call|launch failed|unexpected" "$RESULTS/trace.md" | sed 's/^## /   /'
fi

# ---- 2. Table 1 rows, store_async vs direct ----------------------------------------------------------------
summarize_table() {  # the DSM in-kernel ns and ratios per row of a bench log
  awk -F'|' '/^## ClusterFusion/ {print "   " $0} /^\| (reduce|gather) \|/ {
    printf "   %-6s %3s KB: in kernel %6s ns (CF/DSM %s, global/DSM %s); per launch 1 cl. %s us\n",
      $2, $3+0, $11+0, $13, $16, $6 }' "$1"
}
# ---- cf. ClusterFusion's own configuration --------------------------------------------------------------------
if [ $have_cf -eq 0 ] && wants cf; then
  for transport in direct store_async; do
    step "cf. ClusterFusion configuration, $transport" 60 "$RESULTS/cf-$transport.log" \
      "$BIN/bench_cf_config" --commit "$COMMIT" --transport $transport --markdown "$RESULTS/cf-$transport.md" \
      || status=1
    awk -F'|' '/^\| (reduce|gather) \|/ && NF == 16 {
      printf "   %-6s %3s KB per launch (stream): Solder %s us, CF algorithm %s us; CF published / Solder %s\n",
        $2, $3+0, $7, $8, $13 }
      /^\| (reduce|gather) \|/ && NF == 11 {
      printf "   %-6s %3s KB in kernel: Solder %s ns, CF algorithm %s ns, global %s ns; CF algorithm / Solder %s\n",
        $2, $3+0, $4, $6, $7, $9 } /^Launch floor/ {print "   " $0}' "$RESULTS/cf-$transport.log"
    grep -E "^channel " "$RESULTS/cf-$transport.log" | sed 's/^/   /'
  done
fi

if [ $have_bench -eq 0 ] && wants table; then
  for transport in $TABLE_TRANSPORTS; do
    step "2. Table 1, 256 threads, $transport" 50 "$RESULTS/table-$transport.log" \
      "$BIN/bench_collectives" --commit "$COMMIT" --sections table --table-configs "256/$transport" \
      --markdown "$RESULTS/table-$transport.md"
    summarize_table "$RESULTS/table-$transport.log"
  done
fi

# ---- 3. correctness, in parallel -----------------------------------------------------------------------------
if [ $have_tests -eq 0 ] && wants checks; then
  t=$(limit 130)
  echo "== 3. device tests and sanitizers, 7 processes in parallel, limit $t s (at ${SECONDS} s)"
  if [ "$t" -gt 0 ]; then
    T="$BIN/test_collectives"
    declare -A jobs
    run_bg() { local name=$1; shift; timeout "$t" "$@" >"$RESULTS/$name.log" 2>"$RESULTS/$name.progress" & jobs[$name]=$!; }
    run_bg tests-store_async "$T" --verbose
    run_bg tests-direct "$T" --verbose --transport=direct
    run_bg tests-bulk-subset "$T" --verbose --subset --transport=bulk
    for tool in racecheck memcheck; do
      run_bg "sanitizer-$tool-store_async" "$SANITIZER" --tool $tool --error-exitcode 3 "$T" --subset --verbose
      run_bg "sanitizer-$tool-direct" "$SANITIZER" --tool $tool --error-exitcode 3 "$T" --subset --verbose --transport=direct
    done
    for name in tests-store_async tests-direct tests-bulk-subset sanitizer-racecheck-store_async \
                sanitizer-racecheck-direct sanitizer-memcheck-store_async sanitizer-memcheck-direct; do
      wait "${jobs[$name]}"
      rc=$?
      echo "-- $name: exit $rc$([ $rc -eq 124 ] && echo ' (TIMED OUT)') (at ${SECONDS} s)"
      grep -E "^(FAIL|HANG|TOL)" "$RESULTS/$name.log" | head -5
      grep -E "passed, .* failed|ERROR SUMMARY|RACECHECK SUMMARY|Error|error" "$RESULTS/$name.log" | tail -3
      [ $rc -eq 0 ] || { status=1; echo "   last case: $(tail -1 "$RESULTS/$name.progress" 2>/dev/null)"; }
    done
  fi
fi

# ---- channel. reduce_channel tests and sanitizers ---------------------------------------------------------------
if [ $have_channel -eq 0 ] && wants channel; then
  step "channel. channel device tests (reduce and gather)" 120 "$RESULTS/channel-tests.log" "$BIN/test_channels" --verbose \
    || status=1
  grep -E "^FAIL|HANG|passed, .* failed" "$RESULTS/channel-tests.log" | head -8 | sed 's/^/   /'
  t=$(limit 120)
  if [ "$t" -gt 0 ]; then
    for tool in racecheck memcheck; do
      timeout "$t" "$SANITIZER" --tool $tool --error-exitcode 3 "$BIN/test_channels" --subset \
        >"$RESULTS/channel-$tool.log" 2>&1 &
      eval "pid_$tool=\$!"
    done
    for tool in racecheck memcheck; do
      eval "wait \$pid_$tool"
      rc=$?
      echo "-- channel $tool (subset): exit $rc$([ $rc -eq 124 ] && echo ' (TIMED OUT)') (at ${SECONDS} s)"
      grep -E "passed, .* failed|ERROR SUMMARY|RACECHECK SUMMARY" "$RESULTS/channel-$tool.log" | tail -2 | sed 's/^/   /'
      [ $rc -eq 0 ] || status=1
    done
  else
    echo "== channel sanitizers: SKIPPED (time budget spent at ${SECONDS} s)"
  fi
fi

# ---- floor. where the per-launch floor of the grid goes ---------------------------------------------------------
if [ $have_floor -eq 0 ] && wants floor; then
  step "floor. launch_floor" 60 "$RESULTS/launch-floor.log" "$BIN/launch_floor" --markdown "$RESULTS/launch-floor.md" \
    || status=1
  grep -E "^\| [a-z]" "$RESULTS/launch-floor.log" | sed 's/^/   /'
fi

# ---- 4. launch floor, cluster-size sweep, DSM table ----------------------------------------------------------
if [ $have_bench -eq 0 ] && wants dsm; then
  step "4a. sweep + DSM table, store_async" 45 "$RESULTS/dsm.log" "$BIN/bench_collectives" --commit "$COMMIT" \
    --sections sweep,dsm --threads 256 --transport store_async --markdown "$RESULTS/dsm.md" --json "$RESULTS/dsm-table.json"
  grep -E "^Launch floor|^\| [0-9]+ \|" "$RESULTS/dsm.log" | cut -c1-160 | sed 's/^/   /'
  step "4b. sweep, direct" 25 "$RESULTS/sweep-direct.log" "$BIN/bench_collectives" --commit "$COMMIT" \
    --sections sweep --threads 256 --transport direct --markdown "$RESULTS/sweep-direct.md"
  grep -E "^\| [0-9]+ \|" "$RESULTS/sweep-direct.log" | sed 's/^/   /'
fi

echo "== done at ${SECONDS} s, status $status (logs and tables: $RESULTS)"
exit $status
