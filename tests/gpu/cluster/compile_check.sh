#!/usr/bin/env bash
# Compiles the cluster collectives, their tests and benchmarks for sm_90a with nvcc (no GPU needed, nothing
# runs), and compiles the device headers with NVRTC the way the runtime will. -warn-spills lists register spills
# (warnings, not failures): the communicator's collectives spill in kernels bounded to 1024 threads (64
# registers: test_collectives, up to 160 bytes in its 16-bit all-reduce kernels, measured 2026-11-22 at d1bf598
# and unchanged since; bench_collectives' 1024-bounded kernel, 116 bytes), and 16 bytes around the not-inlined
# push_placeholder; the reduce_channel kernels of the benchmarks do not, nor do the generated kernels (256 threads).
# Usage: tests/gpu/cluster/compile_check.sh   (CUDA=/usr/local/cuda by default; BUILD=build-cluster)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-cluster}
NVCC="$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I$ROOT/device -I$CUDA/include/cccl"
mkdir -p "$BUILD"
cd "$ROOT"
echo "nvcc: $($CUDA/bin/nvcc --version | tail -1)"
$NVCC -Xptxas -warn-spills -c tests/gpu/cluster/test_collectives.cu -o "$BUILD/test_collectives.o"
echo "ok: tests/gpu/cluster/test_collectives.cu"
$NVCC -c tests/gpu/cluster/test_channels.cu -o "$BUILD/test_channels.o"
echo "ok: tests/gpu/cluster/test_channels.cu"
$NVCC -Xptxas -warn-spills -c bench/cluster/bench_collectives.cu -o "$BUILD/bench_collectives.o"
echo "ok: bench/cluster/bench_collectives.cu"
$NVCC -Xptxas -warn-spills -c bench/cluster/bench_cf_config.cu -o "$BUILD/bench_cf_config.o"
echo "ok: bench/cluster/bench_cf_config.cu"
$NVCC -c bench/cluster/launch_floor.cu -o "$BUILD/launch_floor.o"
echo "ok: bench/cluster/launch_floor.cu"
$NVCC -Xptxas -warn-spills -DSOLDER_CLUSTER_TRACE=1 -c bench/cluster/trace_round.cu -o "$BUILD/trace_round.o"
echo "ok: bench/cluster/trace_round.cu (-DSOLDER_CLUSTER_TRACE=1)"
# The two benchmarks reject bad command lines before touching the GPU (exit 2 and a message), so this runs here.
for bench in bench_collectives bench_cf_config launch_floor; do
  $NVCC "$BUILD/$bench.o" -o "$BUILD/$bench"
  for args in "--no-such-option 1" "--transport nowhere"; do
    set +e
    message=$("$BUILD/$bench" $args 2>&1 >/dev/null)
    rc=$?
    set -e
    if [ "$rc" -ne 2 ] || [ -z "$message" ]; then
      echo "FAIL: $bench $args exited $rc (expected 2 with a message): $message"
      exit 1
    fi
  done
done
echo "ok: bench_collectives, bench_cf_config and launch_floor reject bad options (exit 2)"
# Each header on its own (include-what-you-use).
for header in device/solder/cluster/*.cuh; do
  printf '#include <solder/cluster/%s>\n' "$(basename "$header")" > "$BUILD/header_check.cu"
  $NVCC -c "$BUILD/header_check.cu" -o "$BUILD/header_check.o"
done
echo "ok: every header of device/solder/cluster compiles alone"
# limits.cuh is plain C++ for the planner.
printf '#include <solder/cluster/limits.cuh>\nstatic_assert(solder::cluster::check_group(16, 4) == nullptr);\n' > "$BUILD/limits_check.cpp"
g++ -std=c++20 -fsyntax-only -I"$ROOT/device" "$BUILD/limits_check.cpp"
echo "ok: limits.cuh compiles as host C++"
g++ -std=c++20 -O1 -I"$CUDA/include" tests/gpu/cluster/nvrtc_check.cpp -L"$CUDA/lib64" -lnvrtc -o "$BUILD/nvrtc_check"
LD_LIBRARY_PATH="$CUDA/lib64:${LD_LIBRARY_PATH:-}" "$BUILD/nvrtc_check" "$ROOT/device" "$CUDA"
echo "compile_check: all passed"
