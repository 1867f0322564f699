#!/usr/bin/env bash
# Builds and runs the tile-primitive device tests (test_tile.cu, test_block_gemm.cu, test_wgmma.cu, test_topk.cu, test_reduce_combine.cu) on a Hopper GPU, then compute-sanitizer racecheck
# and memcheck on a subset (test_tile --subset). Prints the result table and "N passed, M failed". Logs go to
# LOG_DIR (default: the build directory). Exits non-zero on any failure.
# Usage: tests/gpu/tile/run.sh [tests] [sanitizers]   (both when no stage is named)
#   env: CUDA=/usr/local/cuda, BUILD=build-tile, LOG_DIR=$BUILD, TEST_TIMEOUT=300, SANITIZER_TIMEOUT=240
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-tile}
LOG_DIR=${LOG_DIR:-$BUILD}
NVCC="$CUDA/bin/nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I$ROOT/device"
SANITIZER=${SANITIZER:-$CUDA/bin/compute-sanitizer}
STAGES="${*:-tests sanitizers}"
mkdir -p "$BUILD" "$LOG_DIR"
cd "$ROOT"
if [ ! -x "$BUILD/test_tile" ] || [ -n "$(find device/solder/tile device/solder/runtime.cuh tests/gpu/tile -newer "$BUILD/test_tile" -type f)" ]; then
  $NVCC tests/gpu/tile/test_tile.cu -o "$BUILD/test_tile" || exit 1
fi
if [ ! -x "$BUILD/test_block_gemm" ] || [ -n "$(find device/solder/tile tests/gpu/tile/test_block_gemm.cu -newer "$BUILD/test_block_gemm" -type f)" ]; then
  $NVCC tests/gpu/tile/test_block_gemm.cu -o "$BUILD/test_block_gemm" || exit 1
fi
if [ ! -x "$BUILD/test_wgmma" ] || [ -n "$(find device/solder/tile tests/gpu/tile/test_wgmma.cu -newer "$BUILD/test_wgmma" -type f)" ]; then
  $NVCC tests/gpu/tile/test_wgmma.cu -o "$BUILD/test_wgmma" || exit 1
fi
if [ ! -x "$BUILD/test_topk" ] || [ -n "$(find device/solder/reduce/topk.cuh tests/gpu/tile/test_topk.cu -newer "$BUILD/test_topk" -type f)" ]; then
  $NVCC tests/gpu/tile/test_topk.cu -o "$BUILD/test_topk" || exit 1
fi
if [ ! -x "$BUILD/test_reduce_combine" ] || [ -n "$(find device/solder/reduce/vector.cuh device/solder/runtime.cuh tests/gpu/tile/test_reduce_combine.cu -newer "$BUILD/test_reduce_combine" -type f)" ]; then
  $NVCC tests/gpu/tile/test_reduce_combine.cu -o "$BUILD/test_reduce_combine" || exit 1
fi
status=0
if [[ " $STAGES " == *" tests "* ]]; then
  echo "== device tests"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_tile" --verbose 2>"$LOG_DIR/test-progress.log" | tee "$LOG_DIR/test.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "device tests FAILED (last case: $(tail -1 "$LOG_DIR/test-progress.log"))"; status=1; }
  echo "== block_gemm device tests"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_block_gemm" 2>"$LOG_DIR/block-gemm-progress.log" | tee "$LOG_DIR/block-gemm.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "block_gemm device tests FAILED"; status=1; }
  echo "== wgmma device tests"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_wgmma" | tee "$LOG_DIR/wgmma.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "wgmma device tests FAILED"; status=1; }
  echo "== top-k group step device tests"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_topk" | tee "$LOG_DIR/topk.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "top-k device tests FAILED"; status=1; }
  echo "== reduce combine operator device tests (Max/Min: NaN, +0 > -0)"
  timeout "${TEST_TIMEOUT:-300}" "$BUILD/test_reduce_combine" | tee "$LOG_DIR/reduce-combine.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "reduce combine device tests FAILED"; status=1; }
fi
for tool in racecheck memcheck; do
  [[ " $STAGES " == *" sanitizers "* ]] || break
  echo "== compute-sanitizer --tool $tool (subset)"
  timeout "${SANITIZER_TIMEOUT:-240}" "$SANITIZER" --tool "$tool" --error-exitcode 3 "$BUILD/test_tile" --subset \
    >"$LOG_DIR/sanitizer-$tool.log" 2>&1
  rc=$?
  tail -3 "$LOG_DIR/sanitizer-$tool.log"
  [ $rc -eq 0 ] || { echo "compute-sanitizer $tool FAILED (exit $rc)"; status=1; }
done
exit $status
