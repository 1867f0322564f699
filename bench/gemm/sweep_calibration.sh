#!/usr/bin/env bash
# The cost model's calibration sweep of the GEMM skeleton on an sm_90a GPU: builds bench/gemm/calib_sweep
# (one object per configuration, compiled in parallel) and times CONFIGS × the gemm_chains shapes
# (calib_sweep.cu lists them), writing the sweep JSON of bench/gemm/README.md.
#
# Usage: bench/gemm/sweep_calibration.sh [OUT.json] [--quick]
#   default OUT: ${OUT:-out}/gemm-calibration-sweep.json (the device tool's $OUT), log beside it.
#   SOLDER_CUTLASS_INCLUDE=<folder with cute/> (default: python3 -c 'import cutlass_library'),
#   CUDA=/usr/local/cuda, BUILD=build-calib, JOBS=$(nproc), SKIP_BUILD=1 to reuse $BUILD/calib_sweep,
#   CALIB_DEADLINE_S=50: no new shape starts after that many seconds of timing.
# Then: solder plan --validate OUT.json (docs/planner.md, "Validation").
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA=${CUDA:-${CUDA_HOME:-/usr/local/cuda}}
if [ ! -x "$CUDA/bin/nvcc" ] && command -v nvcc > /dev/null; then CUDA=$(dirname "$(dirname "$(command -v nvcc)")"); fi
BUILD=${BUILD:-$ROOT/build-calib}
JOBS=${JOBS:-$(nproc)}
OUTDIR=${OUT:-out}
JSON=${1:-$OUTDIR/gemm-calibration-sweep.json}
shift || true
mkdir -p "$(dirname "$JSON")" "$BUILD"
# BM x BN x stages; B is N-major (the suite's b[k, n]), so BN is a multiple of 64.
CONFIGS="64x64x4 64x64x6 64x64x8 64x128x4 64x128x6 64x128x8 64x192x4 64x192x6 64x256x4 \
128x64x4 128x64x6 128x64x8 128x128x2 128x128x3 128x128x4 128x128x6 128x192x4 128x256x3 128x256x4"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  CUTLASS=${SOLDER_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))' 2>/dev/null || true)}
  if [ -z "$CUTLASS" ] || [ ! -f "$CUTLASS/cute/tensor.hpp" ]; then
    echo "sweep_calibration: no CuTe headers (set SOLDER_CUTLASS_INCLUDE)"
    exit 1
  fi
  NVCC="$CUDA/bin/nvcc -std=c++17 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a -I$ROOT/device -I$ROOT/src -I$CUTLASS"
  start=$(date +%s)
  export NVCC BUILD ROOT
  compile() {  # $1: BMxBNxSTAGES, or "main", or "tma"
    case $1 in
      main) $NVCC -c "$ROOT/bench/gemm/calib_sweep.cu" -o "$BUILD/calib_main.o" ;;
      tma) $NVCC -c "$ROOT/src/runtime/tma_plan.cpp" -o "$BUILD/tma_plan.o" ;;
      *) IFS=x read -r bm bn st <<< "$1"
         $NVCC -Xptxas -v -DCALIB_BM="$bm" -DCALIB_BN="$bn" -DCALIB_STAGES="$st" -c "$ROOT/bench/gemm/calib_config.cu" \
           -o "$BUILD/calib_$1.o" 2> "$BUILD/calib_$1.ptxas" || { cat "$BUILD/calib_$1.ptxas"; exit 1; }
         if grep -E "C7508|C7513|[1-9][0-9]* bytes spill" "$BUILD/calib_$1.ptxas"; then echo "spills in $1"; exit 1; fi ;;
    esac
  }
  export -f compile
  printf '%s\n' main tma $CONFIGS | xargs -P "$JOBS" -I{} bash -c 'compile {}'
  objects=""
  for c in $CONFIGS; do objects="$objects $BUILD/calib_$c.o"; done
  $NVCC -o "$BUILD/calib_sweep" "$BUILD/calib_main.o" "$BUILD/tma_plan.o" $objects
  echo "sweep_calibration: built $(echo $CONFIGS | wc -w) configurations in $(( $(date +%s) - start )) s with $JOBS jobs"
fi
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader || true
set +e
"$BUILD/calib_sweep" "$JSON" "$@" 2>&1 | tee "${JSON%.json}.log"
rc=${PIPESTATUS[0]}
echo "sweep_calibration: rc=$rc, timing $(( $(date +%s) - start )) s, $JSON"
exit $rc
