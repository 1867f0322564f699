#!/usr/bin/env bash
# One device session for the cluster collectives: builds the device tests and the benchmark in parallel, then
# runs the stages named (default: all) with their logs under OUT (default build-cluster/out).
#   tests        full device-test matrix, default transport (store_async, 256 threads)
#   tests-bulk   full matrix with --transport=bulk_copy; tests-1024: subset at 1024 threads, both transports
#   sanitizers   racecheck + memcheck on the subset, both transports
#   agreement    tests/gpu/cluster/agreement (device collectives vs the CPU executor's values)
#   bench        bench_collectives (markdown + dsm-table.json); bench-scope: the same built with
#                SOLDER_CLUSTER_SCOPE_FENCES=1 (v1-v3 barrier semantics)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
OUT=${OUT:-$ROOT/build-cluster/out}
BIN=${BIN:-$ROOT/build-cluster}
STAGES="${*:-tests tests-bulk tests-1024 sanitizers agreement bench}"
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
mkdir -p "$OUT" "$BIN"
cd "$ROOT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
$NVCC tests/gpu/cluster/test_collectives.cu -o "$BIN/test_collectives" 2>"$OUT/build-tests.log" &
$NVCC bench/cluster/bench_collectives.cu -o "$BIN/bench_collectives" 2>"$OUT/build-bench.log" &
if [[ " $STAGES " == *" bench-scope "* ]]; then  # the v1-v3 cluster-scope barrier semantics, for A/B
  $NVCC -DSOLDER_CLUSTER_SCOPE_FENCES=1 bench/cluster/bench_collectives.cu -o "$BIN/bench_scope" 2>"$OUT/build-bench-scope.log" &
fi
if [ -f tests/gpu/cluster/agreement.cu ] && [[ " $STAGES " == *" agreement "* ]]; then
  $NVCC -I"$ROOT/src" tests/gpu/cluster/agreement.cu -o "$BIN/agreement" 2>"$OUT/build-agreement.log" &
fi
wait
status=0
step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc, $((SECONDS - t0)) s"; tail -3 "$OUT/$name.log"
  [ $rc -eq 0 ] || status=1
}
has() { [[ " $STAGES " == *" $1 "* ]]; }
has tests && step tests 240 "$BIN/test_collectives"
has tests-bulk && step tests-bulk 240 "$BIN/test_collectives" --transport=bulk
has tests-1024 && step tests-1024 60 "$BIN/test_collectives" --subset --threads=1024 && \
  step tests-1024-bulk 60 "$BIN/test_collectives" --subset --threads=1024 --transport=bulk
if has sanitizers; then
  for tool in racecheck memcheck; do
    step "sanitizer-$tool" 150 "$CUDA/bin/compute-sanitizer" --tool $tool --error-exitcode 3 "$BIN/test_collectives" --subset
    step "sanitizer-$tool-bulk" 150 "$CUDA/bin/compute-sanitizer" --tool $tool --error-exitcode 3 "$BIN/test_collectives" --subset --transport=bulk
  done
fi
has agreement && [ -x "$BIN/agreement" ] && step agreement 60 "$BIN/agreement"
has bench && step bench 300 "$BIN/bench_collectives" --commit "${COMMIT:-unknown}" --threads "${BENCH_THREADS:-1024}" \
  --transport "${BENCH_TRANSPORT:-bulk}" --markdown "$OUT/cluster-collectives.md" --json "$OUT/dsm-table.json"
has bench-scope && step bench-scope 300 "$BIN/bench_scope" --commit "${COMMIT:-unknown}-scope-fences" \
  --threads "${BENCH_THREADS:-1024}" --transport "${BENCH_TRANSPORT:-bulk}" --markdown "$OUT/cluster-collectives-scope.md"
exit $status
