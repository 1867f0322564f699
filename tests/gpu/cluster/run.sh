#!/usr/bin/env bash
# Builds and runs the cluster-collective device tests on a Hopper GPU, then compute-sanitizer racecheck and
# memcheck on a representative subset (test_collectives --subset). Logs go to LOG_DIR (default: the build
# directory). Exits non-zero on any failure.
# Usage: tests/gpu/cluster/run.sh [tests] [sanitizers]   (both when no stage is named)
#   env: CUDA=/usr/local/cuda, BUILD=build-cluster, LOG_DIR=$BUILD, TEST_TIMEOUT=300, SANITIZER_TIMEOUT=240
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-cluster}
LOG_DIR=${LOG_DIR:-$BUILD}
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
SANITIZER=${SANITIZER:-$CUDA/bin/compute-sanitizer}
STAGES="${*:-tests sanitizers}"
mkdir -p "$BUILD" "$LOG_DIR"
cd "$ROOT"
if [ ! -x "$BUILD/test_collectives" ] || [ -n "$(find device/solder/cluster tests/gpu/cluster -newer "$BUILD/test_collectives" -type f)" ]; then
  $NVCC tests/gpu/cluster/test_collectives.cu -o "$BUILD/test_collectives" || exit 1
fi
status=0
if [[ " $STAGES " == *" tests "* ]]; then
  echo "== device tests"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_collectives" --verbose 2>"$LOG_DIR/test-progress.log" | tee "$LOG_DIR/test.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "device tests FAILED (last case: $(tail -1 "$LOG_DIR/test-progress.log"))"; status=1; }
fi
for tool in racecheck memcheck; do
  [[ " $STAGES " == *" sanitizers "* ]] || break
  echo "== compute-sanitizer --tool $tool (subset)"
  timeout "${SANITIZER_TIMEOUT:-240}" "$SANITIZER" --tool "$tool" --error-exitcode 3 "$BUILD/test_collectives" --subset \
    >"$LOG_DIR/sanitizer-$tool.log" 2>&1
  rc=$?
  tail -4 "$LOG_DIR/sanitizer-$tool.log"
  [ $rc -eq 0 ] || { echo "compute-sanitizer $tool FAILED (exit $rc)"; status=1; }
done
exit $status
