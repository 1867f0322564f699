#!/usr/bin/env bash
# Checks that test_tile catches bugs: builds it against copies of device/solder with one planted bug each (a
# mutant), runs every mutant and expects each to fail. Prints one line per mutant: the failing table rows.
# Usage: tests/gpu/tile/mutation_check.sh [build] [run]   (both when no stage is named; build needs no GPU)
#   env: CUDA=/usr/local/cuda, BUILD=build-tile/mutants, JOBS=2 (parallel builds), MUTANT_TIMEOUT=60
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-tile/mutants}
STAGES="${*:-build run}"
# name|file under device/solder/tile|sed expression
MUTANTS=(
  "swizzle-row-shift|swizzle.cuh|s/(row \& mask)/((row >> 1) \& mask)/"
  "pack2-bf16-truncates|mma.cuh|s/__floats2bfloat162_rn(lo, hi)/__halves2bfloat162(__float2bfloat16_rz(lo), __float2bfloat16_rz(hi))/"
  "pack2-f16-halves-swapped|mma.cuh|s/__floats2half2_rn(lo, hi)/__floats2half2_rn(hi, lo)/"
  "quad-max-drops-nan|fragment.cuh|0,/solder::max_nan(v,/s//fmaxf(v,/"
  "fragment-row-wrong-bit|fragment.cuh|s/((e >> 1) << 3)/((e \& 1) << 3)/"
  "cp-async-ignores-valid|cp_async.cuh|s/valid ? 16 : 0/16/"
  "cp-async-wait-one-more|cp_async.cuh|s/\"n\"(N)/\"n\"(N + 1)/"
  "ldmatrix-trans-not-transposed|ldmatrix.cuh|s/m8n8.x4.trans.shared/m8n8.x4.shared/"
)
mkdir -p "$BUILD"
cd "$ROOT"
if [[ " $STAGES " == *" build "* ]]; then
  for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r name file expr <<<"$entry"
    rm -rf "$BUILD/$name" && mkdir -p "$BUILD/$name" && cp -r device "$BUILD/$name/device"
    sed -i -e "$expr" "$BUILD/$name/device/solder/tile/$file"
    if cmp -s "device/solder/tile/$file" "$BUILD/$name/device/solder/tile/$file"; then
      echo "mutant $name: the sed expression changed nothing"; exit 1
    fi
    echo "$CUDA/bin/nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I$BUILD/$name/device tests/gpu/tile/test_tile.cu -o $BUILD/$name/test_tile"
  done | xargs -P "${JOBS:-2}" -I{} bash -c "{}" || exit 1
  echo "built ${#MUTANTS[@]} mutants in $BUILD"
fi
if [[ " $STAGES " == *" run "* ]]; then
  survivors=0
  for entry in "${MUTANTS[@]}"; do
    IFS='|' read -r name file expr <<<"$entry"
    timeout "${MUTANT_TIMEOUT:-60}" "$BUILD/$name/test_tile" >"$BUILD/$name/test.log" 2>&1
    rc=$?
    failing=$(grep -E '\*\*' "$BUILD/$name/test.log" | cut -d'|' -f2,3 | tr -s ' ' | paste -sd ';')
    if [ $rc -eq 0 ]; then echo "SURVIVED $name"; survivors=$((survivors + 1))
    else echo "caught   $name (exit $rc): $(tail -1 "$BUILD/$name/test.log");$failing"; fi
  done
  [ $survivors -eq 0 ] || exit 1
fi
