#!/usr/bin/env bash
# The agreement test between the Kernel IR / CPU executor and the device cluster collectives (issue #6):
# builds agreement_reference (CMake, its own build directory, no GoogleTest needed) and agreement.cu (nvcc,
# sm_90a) side by side, runs the reference (the CPU executor writes inputs and its outputs to DATA), then the
# device program on a Hopper GPU, which prints the table and the pass count. Exit status: the device program's
# (0 when every case agrees, random and special values).
# Usage: tests/gpu/cluster/agreement.sh          build both, run both (needs a GPU)
#        tests/gpu/cluster/agreement.sh compile  only compile agreement.cu for sm_90a (no GPU; ctest runs this)
#   env: CUDA=/usr/local/cuda, BUILD=build-agree, DATA=$BUILD/data, LOG_DIR=$BUILD, JOBS=$(nproc);
#        HOST_BIN=path/agreement_reference DEVICE_BIN=path/agreement: use these builds (skips both builds)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-agree}
DATA=${DATA:-$BUILD/data}
LOG_DIR=${LOG_DIR:-$BUILD}
JOBS=${JOBS:-$(nproc)}
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
mkdir -p "$BUILD" "$LOG_DIR"
cd "$ROOT"

if [ "${1:-}" = compile ]; then
  $NVCC -c tests/gpu/cluster/agreement.cu -o "$BUILD/agreement.o" || exit 1
  echo "ok: tests/gpu/cluster/agreement.cu compiles for sm_90a"
  exit 0
fi

HOST_BIN=${HOST_BIN:-}
DEVICE_BIN=${DEVICE_BIN:-}
if [ -n "$HOST_BIN" ] && [ -n "$DEVICE_BIN" ]; then
  echo "== prebuilt: $HOST_BIN, $DEVICE_BIN"
else
  HOST_BIN=$BUILD/host/agreement_reference
  DEVICE_BIN=$BUILD/agreement
  echo "== build (host: CMake in $BUILD/host; device: nvcc), $JOBS jobs"
  start=$SECONDS
  $NVCC tests/gpu/cluster/agreement.cu -o "$BUILD/agreement" >"$LOG_DIR/nvcc.log" 2>&1 &
  nvcc_pid=$!
  { cmake -S "$ROOT" -B "$BUILD/host" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF -DSOLDER_BUILD_AGREEMENT=ON &&
    cmake --build "$BUILD/host" -j "$JOBS" --target agreement_reference; } >"$LOG_DIR/host-build.log" 2>&1
  host_rc=$?
  wait $nvcc_pid
  nvcc_rc=$?
  [ $host_rc -eq 0 ] || { echo "host build FAILED"; grep -B2 -A8 -m3 error "$LOG_DIR/host-build.log" || tail -30 "$LOG_DIR/host-build.log"; exit 1; }
  [ $nvcc_rc -eq 0 ] || { echo "nvcc FAILED"; tail -30 "$LOG_DIR/nvcc.log"; exit 1; }
  echo "built in $((SECONDS - start)) s"
fi

echo "== CPU executor (agreement_reference)"
rm -rf "$DATA" && mkdir -p "$DATA"
"$HOST_BIN" "$DATA" || exit 1
# A digest of the executor's outputs, to compare between machines (inter_cluster_reduce(sum) is left out: the
# executor's blocks combine in whatever order its threads take the lock, as the order is unspecified).
(cd "$DATA" && awk '!/inter_cluster_reduce sum/ { printf "case%03d.y\n", $1 }' manifest.txt | xargs sha256sum | sha256sum |
  cut -c1-16 | sed 's/^/executor outputs digest (all but inter_cluster_reduce sum): /')

echo "== device library (agreement)"
timeout "${TEST_TIMEOUT:-300}" "$DEVICE_BIN" "$DATA" --verbose 2>"$LOG_DIR/device-progress.log" | tee "$LOG_DIR/agreement.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || echo "agreement: exit $rc (last case: $(tail -1 "$LOG_DIR/device-progress.log"))"
exit "$rc"
