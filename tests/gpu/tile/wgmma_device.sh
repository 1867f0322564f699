#!/usr/bin/env bash
# Builds and runs the wgmma device tests on a Hopper GPU: tests/gpu/tile/test_wgmma.cu (the wrappers of
# device/solder/tile/wgmma.cuh against a float64 reference) and tests/gpu/tile/attention_wgmma_proto.cu (the
# FlashAttention-3-style prototype: checks, then µs and TFLOP/s), then compute-sanitizer memcheck on the
# prototype's small cases. Prints everything; exits non-zero when a build, a test or a check fails.
# Usage: bash tests/gpu/tile/wgmma_device.sh      env: CUDA=/usr/local/cuda, BUILD=build-wgmma
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-wgmma}
NVCC="$CUDA/bin/nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 -I$ROOT/device"
mkdir -p "$BUILD"
cd "$ROOT"
echo "nvcc: $($CUDA/bin/nvcc --version | tail -1)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv 2>/dev/null
status=0

echo "== build (both in parallel; ptxas resource usage and any ptxas warning of the prototype below)"
start=$SECONDS
$NVCC -Xptxas -warn-spills tests/gpu/tile/test_wgmma.cu -o "$BUILD/test_wgmma" >"$BUILD/build-test.log" 2>&1 &
test_pid=$!
$NVCC -Xptxas -v,-warn-spills tests/gpu/tile/attention_wgmma_proto.cu -o "$BUILD/attention_wgmma_proto" >"$BUILD/build-proto.log" 2>&1 &
proto_pid=$!
wait $test_pid; test_build=$?
wait $proto_pid; proto_build=$?
cat "$BUILD/build-test.log"
grep -E "C75|warning|error|Used|spill|Compiling" "$BUILD/build-proto.log"
echo "build: $((SECONDS - start)) s"
[ $test_build -eq 0 ] || { echo "test_wgmma build FAILED"; cat "$BUILD/build-test.log"; status=1; }
[ $proto_build -eq 0 ] || { echo "attention_wgmma_proto build FAILED"; cat "$BUILD/build-proto.log"; status=1; }

if [ $proto_build -eq 0 ] && [ -x "$CUDA/bin/cuobjdump" ]; then
  echo "== SASS of the prototype: HGMMA (wgmma) and HMMA (mma.sync) instructions per kernel"
  "$CUDA/bin/cuobjdump" -sass "$BUILD/attention_wgmma_proto" | awk '
    /Function :/ { if (name) printf "  %-70s HGMMA %d, HMMA %d, WARPGROUP.ARRIVE %d, WARPGROUP.DEPBAR %d\n", name, hg, hm, ar, dp; name = $3; hg = hm = ar = dp = 0 }
    /HGMMA/ { hg++ } /HMMA/ { hm++ } /WARPGROUP.ARRIVE/ { ar++ } /WARPGROUP.DEPBAR/ { dp++ }
    END { if (name) printf "  %-70s HGMMA %d, HMMA %d, WARPGROUP.ARRIVE %d, WARPGROUP.DEPBAR %d\n", name, hg, hm, ar, dp }'
fi
if [ $test_build -eq 0 ]; then
  echo "== test_wgmma"
  timeout 60 "$BUILD/test_wgmma"
  rc=$?
  [ $rc -eq 0 ] || { echo "test_wgmma FAILED (exit $rc)"; status=1; }
fi
if [ $proto_build -eq 0 ]; then
  echo "== attention_wgmma_proto"
  timeout 90 "$BUILD/attention_wgmma_proto"
  rc=$?
  [ $rc -eq 0 ] || { echo "attention_wgmma_proto FAILED (exit $rc)"; status=1; }
  if [ -x "$CUDA/bin/compute-sanitizer" ]; then
    echo "== compute-sanitizer memcheck: attention_wgmma_proto --small"
    timeout 60 "$CUDA/bin/compute-sanitizer" --tool memcheck --error-exitcode 3 "$BUILD/attention_wgmma_proto" --small 2>&1 | tail -15
    rc=${PIPESTATUS[0]}
    [ $rc -eq 0 ] || { echo "memcheck FAILED (exit $rc)"; status=1; }
  fi
fi
echo "wgmma_device: $([ $status -eq 0 ] && echo all passed || echo FAILED)"
exit $status
