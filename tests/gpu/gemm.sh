#!/usr/bin/env bash
# Tensor-core contractions of the generic writer (src/backend/cuda/gemm_codegen.cpp) on a Hopper GPU:
#   1. the block_gemm device test (tests/gpu/tile/test_block_gemm.cu) against its float64 host reference;
#   2. every example that takes the path, verified at small and default sizes (solder run --backend cuda);
#   3. the MoE router's time at R7 (solder bench), with BEFORE (a solder without the path) beside it when given,
#      and with the row / stream tiles of TILES ("rows:cols ...").
# Prints one line per step and a table last; full logs under OUT (default build-gemm-out).
# env: SOLDER (default: build one into build/), TILE_TEST (default: compile it), BEFORE, EXAMPLES, TILES, OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-build-gemm-out}
mkdir -p "$OUT"
EXAMPLES=${EXAMPLES:-"moe_routing ffn gated_ffn mla_decode nerf_mlp"}
TILES=${TILES:-}
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(date -u +%FT%TZ)"
SOLDER=${SOLDER:-}
if [ -z "$SOLDER" ] || ! "$SOLDER" --help >/dev/null 2>&1; then
  note "building solder"
  (timeout 300 cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF &&
   timeout 300 cmake --build build -j16 --target solder) >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  SOLDER=./build/solder
fi

# 1. The primitive.
TILE_TEST=${TILE_TEST:-}
if [ -z "$TILE_TEST" ] || [ ! -x "$TILE_TEST" ]; then
  TILE_TEST="$OUT/test_block_gemm"
  timeout 300 nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Idevice tests/gpu/tile/test_block_gemm.cu -o "$TILE_TEST" \
    >"$OUT/tile.log" 2>&1 || { tail -20 "$OUT/tile.log"; exit 1; }
fi
timeout 120 "$TILE_TEST" >>"$OUT/tile.log" 2>&1
note "block_gemm device test: exit $? ($(tail -1 "$OUT/tile.log"))"
grep FAIL "$OUT/tile.log" | head -5

# 2. Every example on the path, small and default sizes.
for example in $EXAMPLES; do
  for size in --small ""; do
    start=$(date +%s.%N)
    timeout ${RUN_TIMEOUT:-45} "$SOLDER" run "examples/$example.sol" --backend cuda $size >"$OUT/run.tmp" 2>&1
    rc=$?
    { echo "== $example ${size:-default} (exit $rc)"; cat "$OUT/run.tmp"; } >>"$OUT/runs.log"
    note "run $example ${size:-default}: exit $rc ($(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $start }") s) $(tail -1 "$OUT/run.tmp" | cut -c1-200)"
  done
done
rm -f "$OUT/run.tmp"

# 3. R7 time.
bench() {  # label, solder, options...
  local label=$1 binary=$2
  shift 2
  timeout 120 "$binary" bench examples/moe_routing.sol "$@" >"$OUT/bench.tmp" 2>&1
  local rc=$?
  { echo "== $label $* (exit $rc)"; cat "$OUT/bench.tmp"; } >>"$OUT/bench.log"
  note "bench R7 $label $*: exit $rc"
  tail -4 "$OUT/bench.tmp" | tee -a "$summary"
}
[ -n "${BEFORE:-}" ] && [ -x "${BEFORE:-}" ] && bench before "$BEFORE"
bench after "$SOLDER"
for t in $TILES; do bench after "$SOLDER" --tile-rows "${t%%:*}" --tile-cols "${t##*:}"; done
bench after-again "$SOLDER"
rm -f "$OUT/bench.tmp"
echo "==== summary"
cat "$summary"
