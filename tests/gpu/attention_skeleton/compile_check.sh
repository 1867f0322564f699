#!/usr/bin/env bash
# Compiles the attention skeleton's device test and benchmark (tests/gpu/attention_skeleton/
# test_sm90_attention.cu, bench/attention/bench_attention.cu) and each header of device/solder/attention
# for sm_90a with nvcc. No GPU needed, nothing runs. Fails when ptxas reports register spills, a stack
# frame (a call that was not inlined), an ignored setmaxnreg (C7508) or serialized wgmma (C7510, C7513,
# C7514, C7515, C7517, C7518, C7520).
# Usage: tests/gpu/attention_skeleton/compile_check.sh [test|dual|exp2|bench|headers|all]  (dual:
# test_sm90_attention_dual.cu, the dual mode of sm90_attention_dual.cuh; exp2: test_sm90_exp2_poly.cu, the
# row state's exponential on the FMA pipe)
#   CUDA=/usr/local/cuda, BUILD=build-attn, SOLDER_CUTLASS_INCLUDE=<folder with cute/> (default: python3
#   -c 'import cutlass_library'); OUT_BIN=1 links executables into $BUILD instead of compiling objects;
#   EXP2_EMULATED=K builds every kernel with K of 16 softmax weights on the FMA pipe (functors.cuh,
#   kExp2Emulated: -DSOLDER_ATTN_EXP2_EMULATED_DEFAULT=K; the device tests with the emulation on).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-attn}
WHAT=${1:-all}
CUTLASS=${SOLDER_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))' 2>/dev/null || true)}
if [ -z "$CUTLASS" ] || [ ! -f "$CUTLASS/cute/tensor.hpp" ]; then
  echo "compile_check: no CuTe headers (set SOLDER_CUTLASS_INCLUDE or pip install nvidia-cutlass==4.2.0.0)"
  exit 1
fi
NVCC="$CUDA/bin/nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I$ROOT/device -I$ROOT/src -I$CUTLASS"
[ -n "${EXP2_EMULATED:-}" ] && NVCC="$NVCC -DSOLDER_ATTN_EXP2_EMULATED_DEFAULT=$EXP2_EMULATED"
mkdir -p "$BUILD"
cd "$ROOT"
echo "nvcc: $($CUDA/bin/nvcc --version | tail -1); CuTe: $CUTLASS"

check_ptxas() {  # $1: ptxas log
  if grep -E "C7508|C7510|C7513|C7514|C7515|C7517|C7518|C7520|spill stores, [1-9]|[1-9][0-9]* bytes spill|[1-9][0-9]* bytes stack frame" "$1"; then
    echo "FAILED: ptxas reports spills, a stack frame (a call not inlined), an ignored setmaxnreg (C7508) or serialized wgmma (C7510/C7513/C7514/C7515/C7517/C7518/C7520): $1"
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
  build test_sm90_attention tests/gpu/attention_skeleton/test_sm90_attention.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = dual ] || [ "$WHAT" = all ]; then
  build test_sm90_attention_dual tests/gpu/attention_skeleton/test_sm90_attention_dual.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = exp2 ] || [ "$WHAT" = all ]; then
  build test_sm90_exp2_poly tests/gpu/attention_skeleton/test_sm90_exp2_poly.cu
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  build bench_attention bench/attention/bench_attention.cu src/runtime/tma_plan.cpp
fi
if [ "$WHAT" = headers ] || [ "$WHAT" = all ]; then
  for header in device/solder/attention/*.cuh; do
    printf '#include <solder/attention/%s>\n' "$(basename "$header")" > "$BUILD/attention_header_check.cu"
    $NVCC -c "$BUILD/attention_header_check.cu" -o "$BUILD/attention_header_check.o"
  done
  # config.cuh is also plain C++ (the code generator and the cost model include it).
  printf '#include "solder/attention/config.cuh"\nint main() { using C = solder::attention::Config<solder::gemm::Dtype::bf16, 128, 128, 2, 2>; return C::Threads == 384 && C::BM == 128 ? 0 : 1; }\n' > "$BUILD/attention_config_host.cpp"
  ${CXX:-g++} -std=c++17 -I"$ROOT/device" -o "$BUILD/attention_config_host" "$BUILD/attention_config_host.cpp"
  "$BUILD/attention_config_host"
  echo "ok: every header of device/solder/attention compiles alone; config.cuh compiles as plain C++"
fi
echo "compile_check: all passed"
