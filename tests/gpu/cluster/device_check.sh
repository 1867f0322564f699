#!/usr/bin/env bash
# One device session for the cluster collectives and the generated code that calls them (issue #6), on a
# Hopper GPU. Builds solder and agreement_reference (CMake, BUILD) and the two nvcc programs side by side, then,
# each step under a time limit, printing as it goes:
#   1. agreement.sh       the CPU executor against the device library (random inputs and special values)
#   2. agreement_reference --generated
#                         the CUDA code generator's collectives (which call the library) against the executor
#   3. solder run --backend cuda for every example/dims (CASES) whose kernels use cluster collectives
#   4. run.sh tests       the device tests (test_collectives), all of them
# Logs go to LOG_DIR, and with $OUT set (the device machine) into $OUT/device_check_logs.tgz (the files that come
# back from a run are few). Exit status: non-zero when any step failed.
# Usage: tests/gpu/cluster/device_check.sh [steps]   (steps: any of agree generated examples tests; default all)
#   env: CUDA=/usr/local/cuda, BUILD=build, LOG_DIR=$BUILD/logs, JOBS=$(nproc)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build}
LOG_DIR=${LOG_DIR:-$BUILD/logs}
JOBS=${JOBS:-$(nproc)}
STEPS=" ${*:-agree generated examples tests} "
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
# The examples whose kernels use cluster collectives at these dims (solder print --after fuse --gpu).
CASES=(
  "variance --dim BS=128"
  "variance_offset --dim BS=128"
  "softmax --dim T=8"
  "moe_routing --dim T=8"
  "moe_routing --dim T=1"
  "inertia --dim BS=128"
  "inertia --dim DIM=8"
  "mla_decode --dim H=1"
  "nerf_mlp --dim N=8"
  "nerf_mlp --dim N=1"
)
mkdir -p "$BUILD" "$LOG_DIR"
cd "$ROOT"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$BUILD/nvrtc-cache}
status=0
step() { echo "== $* (at ${SECONDS} s)"; }
failed() { echo "FAILED: $*"; status=1; }

step "build: solder + agreement_reference (CMake, $JOBS jobs), agreement + test_collectives (nvcc)"
$NVCC tests/gpu/cluster/agreement.cu -o "$BUILD/agreement" >"$LOG_DIR/nvcc-agreement.log" 2>&1 &
nvcc_agreement=$!
$NVCC tests/gpu/cluster/test_collectives.cu -o "$BUILD/test_collectives" >"$LOG_DIR/nvcc-tests.log" 2>&1 &
nvcc_tests=$!
{ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF -DSOLDER_BUILD_AGREEMENT=ON &&
  cmake --build "$BUILD" -j "$JOBS" --target solder agreement_reference; } >"$LOG_DIR/build.log" 2>&1 ||
  { grep -m5 -A5 error "$LOG_DIR/build.log"; echo "build FAILED"; exit 1; }
wait $nvcc_agreement || { tail -20 "$LOG_DIR/nvcc-agreement.log"; failed "nvcc agreement.cu"; }
wait $nvcc_tests || { tail -20 "$LOG_DIR/nvcc-tests.log"; failed "nvcc test_collectives.cu"; }
echo "built in $SECONDS s"

if [[ "$STEPS" == *" agree "* ]]; then
  step "1. executor vs device library (agreement.sh)"
  HOST_BIN="$BUILD/agreement_reference" DEVICE_BIN="$BUILD/agreement" BUILD="$BUILD/agree" LOG_DIR="$LOG_DIR" TEST_TIMEOUT=120 \
    bash tests/gpu/cluster/agreement.sh >"$LOG_DIR/agreement-full.log" 2>&1 || failed "agreement.sh"
  grep -E "^(FAIL|DIFF|HANG)|agree|digest|device:" "$LOG_DIR/agreement-full.log" | tail -12
fi

if [[ "$STEPS" == *" generated "* ]]; then
  step "2. generated code vs executor (agreement_reference --generated)"
  timeout 180 "$BUILD/agreement_reference" --generated >"$LOG_DIR/generated.log" 2>&1 || failed "agreement_reference --generated"
  grep -E "^DIFF|generated code" "$LOG_DIR/generated.log" | tail -12
fi

if [[ "$STEPS" == *" examples "* ]]; then
  step "3. solder run --backend cuda, examples with cluster collectives"
  for c in "${CASES[@]}"; do
    read -r example dims <<<"$c"
    log="$LOG_DIR/run-$example-$(echo "$dims" | tr -c 'A-Za-z0-9\n' '_').log"
    t0=$SECONDS
    timeout 60 "$BUILD/solder" run "examples/$example.sol" --backend cuda $dims >"$log" 2>&1
    rc=$?
    echo "run $example $dims: exit $rc, $((SECONDS - t0)) s: $(head -1 "$log")"
    grep -E "^ +output|^(verified|FAIL)|rror" "$log" | head -6
    [ $rc -eq 0 ] || failed "solder run $example $dims"
  done
fi

if [[ "$STEPS" == *" tests "* ]]; then
  step "4. device tests (run.sh tests)"
  BUILD="$BUILD" LOG_DIR="$LOG_DIR" TEST_TIMEOUT=150 bash tests/gpu/cluster/run.sh tests >"$LOG_DIR/tests-full.log" 2>&1 || failed "run.sh tests"
  tail -3 "$LOG_DIR/tests-full.log"
fi
step "done, status $status"
[ -n "${OUT:-}" ] && tar czf "$OUT/device_check_logs.tgz" -C "$LOG_DIR" . && echo "logs: \$OUT/device_check_logs.tgz"
exit $status
