#!/usr/bin/env bash
# Compiles the GEMM skeleton's device test and benchmark (tests/gpu/gemm/test_sm90_gemm.cu,
# bench/gemm/bench_gemm.cu) and each header of device/solder/gemm for sm_90a with nvcc. No GPU needed,
# nothing runs. Fails when ptxas reports register spills, an ignored setmaxnreg (C7508) or serialized
# wgmma (C7510, C7513, C7514, C7515, C7517, C7518, C7520).
# Usage: tests/gpu/gemm/compile_check.sh [test|prologue|rows|chain|ranges|bench|headers|all]   (test includes prologue:
# tests/gpu/gemm/test_sm90_gemm_prologue.cu, the operand-prologue path, and rows: test_sm90_gemm_rows.cu,
# the row-reduction epilogue, and chain: test_sm90_chain.cu, the layer chain; ranges: test_sm90_gemm_ranges.cu,
# the two-K-range kernel, built by `ranges` and `all` only)
#   CUDA=/usr/local/cuda, BUILD=build-gemm, SOLDER_CUTLASS_INCLUDE=<folder with cute/> (default: python3
#   -c 'import cutlass_library'); OUT_BIN=1 links executables into $BUILD instead of compiling objects.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-gemm}
WHAT=${1:-all}
CUTLASS=${SOLDER_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))' 2>/dev/null || true)}
if [ -z "$CUTLASS" ] || [ ! -f "$CUTLASS/cute/tensor.hpp" ]; then
  echo "compile_check: no CuTe headers (set SOLDER_CUTLASS_INCLUDE or pip install nvidia-cutlass==4.2.0.0)"
  exit 1
fi
NVCC="$CUDA/bin/nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I$ROOT/device -I$ROOT/src -I$CUTLASS"
mkdir -p "$BUILD"
cd "$ROOT"
echo "nvcc: $($CUDA/bin/nvcc --version | tail -1); CuTe: $CUTLASS"

check_ptxas() {  # $1: ptxas log
  if grep -E "C7508|C7510|C7513|C7514|C7515|C7517|C7518|C7520|spill stores, [1-9]|[1-9][0-9]* bytes spill" "$1"; then
    echo "FAILED: ptxas reports spills, an ignored setmaxnreg (C7508) or serialized wgmma (C7510/C7513/C7514/C7515/C7517/C7518/C7520): $1"
    exit 1
  fi
}

build() {  # $1: name, then sources
  local name=$1
  shift
  if [ "${OUT_BIN:-0}" = 1 ]; then
    $NVCC -Xptxas -v -Xcompiler -fopenmp -o "$BUILD/$name" "$@" -lgomp 2>"$BUILD/$name.ptxas" || { cat "$BUILD/$name.ptxas"; exit 1; }
  else
    $NVCC -Xptxas -v -Xcompiler -fopenmp -c "$1" -o "$BUILD/$name.o" 2>"$BUILD/$name.ptxas" || { cat "$BUILD/$name.ptxas"; exit 1; }
  fi
  check_ptxas "$BUILD/$name.ptxas"
  echo "ok: $name ($(grep -c 'Compiling entry function' "$BUILD/$name.ptxas") kernels, no spills, setmaxnreg and wgmma kept)"
}

if [ "$WHAT" = test ] || [ "$WHAT" = all ]; then
  build test_sm90_gemm tests/gpu/gemm/test_sm90_gemm.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = test ] || [ "$WHAT" = prologue ] || [ "$WHAT" = all ]; then
  build test_sm90_gemm_prologue tests/gpu/gemm/test_sm90_gemm_prologue.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = test ] || [ "$WHAT" = rows ] || [ "$WHAT" = all ]; then
  build test_sm90_gemm_rows tests/gpu/gemm/test_sm90_gemm_rows.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = test ] || [ "$WHAT" = chain ] || [ "$WHAT" = all ]; then
  build test_sm90_chain tests/gpu/gemm/test_sm90_chain.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = ranges ] || [ "$WHAT" = all ]; then
  build test_sm90_gemm_ranges tests/gpu/gemm/test_sm90_gemm_ranges.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  build bench_gemm bench/gemm/bench_gemm.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = headers ] || [ "$WHAT" = all ]; then
  for header in device/solder/gemm/*.cuh; do
    printf '#include <solder/gemm/%s>\n' "$(basename "$header")" > "$BUILD/gemm_header_check.cu"
    $NVCC -c "$BUILD/gemm_header_check.cu" -o "$BUILD/gemm_header_check.o"
  done
  # config.cuh is also plain C++ (the code generator and the cost model include it).
  printf '#include "solder/gemm/config.cuh"\nint main() { return solder::gemm::Config<solder::gemm::Dtype::bf16, solder::gemm::Dtype::bf16, 128, 128, 6>::Threads == 384 ? 0 : 1; }\n' > "$BUILD/gemm_config_host.cpp"
  ${CXX:-g++} -std=c++17 -I"$ROOT/device" -o "$BUILD/gemm_config_host" "$BUILD/gemm_config_host.cpp"
  "$BUILD/gemm_config_host"
  echo "ok: every header of device/solder/gemm compiles alone; config.cuh compiles as plain C++"
fi
echo "compile_check: all passed"
