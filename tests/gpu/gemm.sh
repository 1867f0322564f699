#!/usr/bin/env bash
# Tensor-core contractions of the generic writer (src/backend/cuda/gemm_codegen.cpp) on a Hopper GPU:
#   1. the block_gemm device test (tests/gpu/tile/test_block_gemm.cu) against its float64 host reference;
#   2. every example that takes the path, verified at small and default sizes (solder run --backend cuda),
#      and the examples whose contraction operand is an expression (ffn, gated_ffn: computed f16
#      operands; quant_gemm, rmsnorm_gemm: refused, scalar) at small, default, a second paper shape
#      (bench/suites.py: ffn-S2, gated_ffn-S2; the defaults are S1 and Q5) and ragged dims;
#   3. the MoE router's time at R7 (solder bench), with BEFORE (a solder without the path) beside it when given,
#      and with the row / stream tiles of TILES ("rows:cols ...").
# Prints one line per step (PASS / FAIL per run) and a summary last; full logs under OUT (default
# build-gemm-out). Exit status 1 when a run failed.
# env: SOLDER (default: build one into build/), TILE_TEST (default: compile it), BEFORE, EXAMPLES, TILES, OUT,
#      SKIP_BENCH=1 (no step 3).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-build-gemm-out}
mkdir -p "$OUT"
EXAMPLES=${EXAMPLES:-"moe_routing ffn gated_ffn mla_decode nerf_mlp llama_decode quant_gemm rmsnorm_gemm"}
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

# 2. Every example on the path, small and default sizes; the expression-operand examples at more shapes.
passed=0
failed=0
check_run() {  # label, arguments of solder run
  local label=$1
  shift
  local start rc
  start=$(date +%s.%N)
  timeout ${RUN_TIMEOUT:-60} "$SOLDER" run "$@" --backend cuda >"$OUT/run.tmp" 2>&1
  rc=$?
  { echo "== $label: solder run $* --backend cuda (exit $rc)"; cat "$OUT/run.tmp"; } >>"$OUT/runs.log"
  local verdict=FAIL
  if [ $rc -eq 0 ] && grep -q verified "$OUT/run.tmp" && ! grep -q MISMATCH "$OUT/run.tmp"; then verdict=PASS; passed=$((passed + 1)); else failed=$((failed + 1)); fi
  note "$verdict run $label: exit $rc ($(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $start }") s) $(tail -1 "$OUT/run.tmp" | cut -c1-200)"
}
for example in $EXAMPLES; do
  check_run "$example small" "examples/$example.sol" --small
  check_run "$example default" "examples/$example.sol"
done
# Paper shapes (bench/suites.py --list): the defaults are ffn-S1, gated_ffn-S1 and quant_gemm-Q5; S2 here.
check_run "ffn S2" examples/ffn.sol --dim M=128 --dim N=5632 --dim K=2048 --dim L=2048
check_run "gated_ffn S2" examples/gated_ffn.sol --dim M=128 --dim N=5632 --dim K=2048 --dim L=2048
# Ragged dims (guarded tiles: these take the scalar path today; a check that nothing else broke).
check_run "ffn ragged" examples/ffn.sol --dim M=40 --dim N=200 --dim K=96 --dim L=80
check_run "gated_ffn ragged" examples/gated_ffn.sol --dim M=40 --dim N=200 --dim K=96 --dim L=80
check_run "quant_gemm ragged" examples/quant_gemm.sol --dim M=100 --dim N=96 --dim K=200
rm -f "$OUT/run.tmp"
note "runs: $passed PASS, $failed FAIL"

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
if [ -z "${SKIP_BENCH:-}" ]; then
  [ -n "${BEFORE:-}" ] && [ -x "${BEFORE:-}" ] && bench before "$BEFORE"
  bench after "$SOLDER"
  for t in $TILES; do bench after "$SOLDER" --tile-rows "${t%%:*}" --tile-cols "${t##*:}"; done
  bench after-again "$SOLDER"
  rm -f "$OUT/bench.tmp"
fi
echo "==== summary"
cat "$summary"
if [ "$failed" -eq 0 ]; then echo "PASS: all $passed runs verified"; else echo "FAIL: $failed of $((passed + failed)) runs did not verify"; exit 1; fi
