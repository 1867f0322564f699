#!/usr/bin/env bash
# One device call for the GEMM skeleton's row stores on the short-K products (issue 15, branch gemm-shortk):
# nerf_mlp's 256 x 256 layers and linear_relu_backward. Run from the repository root of a copy of the tree:
#
#   bench/gemm_shortk_device.sh OUTDIR [DEADLINE_S]
#
# Env: SOLDER (default build/solder), GEMM_TEST (the skeleton's device test binary, default
# build-gemm/test_sm90_gemm: tests/gpu/gemm/compile_check.sh test with OUT_BIN=1 builds it),
# SOLDER_CUTLASS_INCLUDE (CuTe headers, for NVRTC).
# (1) the kernels of both variants compile into the NVRTC cache in the background while (2) the device test
# runs (every family, the row-store ones included); (3) nerf_mlp and linear_relu_backward verified through
# the CUDA backend at the default sizes (row stores on); (4) `solder bench` of the three cases, row stores on
# (new) then off (SOLDER_GEMM_ROW_STORE=0: the element-wise stores of before), Solder first; (5) ncu's
# per-kernel durations of nerf_mlp, both variants; (6) the peers (torch eager, then torch.compile in its
# default mode) on the same cases, before the ncu step (peers are the workload target). Everything goes to OUTDIR as it runs.
set -uo pipefail
out=${1:?usage: bench/gemm_shortk_device.sh OUTDIR [DEADLINE_S]}
deadline=${2:-230}
SOLDER=${SOLDER:-build/solder}
GEMM_TEST=${GEMM_TEST:-build-gemm/test_sm90_gemm}
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/solder-shortk}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/inductor}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
cases=("examples/nerf_mlp.sol" "examples/linear_relu_backward.sol" "examples/linear_relu_backward.sol --dim N=16384 --dim CI=1024 --dim CO=1024")

echo "== 1+2. compile cache (background) and the GEMM device test"
(
  for c in "${cases[@]}"; do
    echo "timeout 120 $SOLDER bench $c --compile-only"
    echo "SOLDER_GEMM_ROW_STORE=0 timeout 120 $SOLDER bench $c --compile-only"
  done | xargs -d '\n' -P 6 -n 1 sh -c > "$out/compile.log" 2>&1
) &
compile_pid=$!
# The row-store families first (GEMM_TEST_FILTER; a binary without the filter runs everything).
GEMM_TEST_FILTER=" rows" timeout 100 "$GEMM_TEST" 2026 > "$out/test_sm90_gemm_rows.txt" 2>&1
echo "   device test (rows) rc=$? PASS=$(grep -c '^PASS' "$out/test_sm90_gemm_rows.txt") FAIL=$(grep -c '^FAIL' "$out/test_sm90_gemm_rows.txt") rows-PASS=$(grep '^PASS' "$out/test_sm90_gemm_rows.txt" | grep -c ' rows ')"
grep '^FAIL' "$out/test_sm90_gemm_rows.txt" | head -5
tail -n 1 "$out/test_sm90_gemm_rows.txt"
wait "$compile_pid"
echo "   compile done after $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 3. verification through the CUDA backend (row stores on), $(left) s left"
for e in nerf_mlp linear_relu_backward; do
  timeout 60 "$SOLDER" run --backend cuda --json "examples/$e.sol" > "$out/run-$e.json" 2> "$out/run-$e.err"
  echo "   $e rc=$? $(grep -o '"rel_error":[^,]*' "$out/run-$e.json" | tr '\n' ' ' | head -c 200)"
done

echo "== 4. solder bench: row stores on, then off, $(left) s left"
for variant in on off; do
  for c in "${cases[@]}"; do
    env_=""; [ $variant = off ] && env_="SOLDER_GEMM_ROW_STORE=0"
    r=$(env $env_ timeout 60 $SOLDER bench $c --json 2>> "$out/bench.err")
    echo "{\"variant\": \"$variant\", \"case\": \"$c\", \"result\": $r}" >> "$out/solder.jsonl"
    echo "   $variant $c: $(echo "$r" | grep -o '"median_us":[^,]*' | head -1)"
  done
done

echo "== 5. peers (eager, then torch.compile default), $(left) s left"
timeout $(( $(left) > 130 ? 40 : 20 )) python3 bench/peers.py --suite contractions --peers eager --no-ceilings \
  --cases 'linear_relu_backward|nerf_mlp' --out "$out/peers.jsonl" --commit "${SOLDER_COMMIT:-gemm-shortk}" 2>&1 | tail -n 4
timeout $(( $(left) > 100 ? $(left) - 70 : 20 )) python3 bench/peers.py --suite contractions --peers compile --compile-mode default --no-ceilings \
  --cases 'nerf_mlp|linear_relu_backward-nerf' --time-limit $(( $(left) > 130 ? $(left) - 120 : 5 )) \
  --out "$out/peers.jsonl" --commit "${SOLDER_COMMIT:-gemm-shortk}" 2>&1 | tail -n 4
python3 - "$out/peers.jsonl" <<'PY'
import json, sys
try:
    for l in open(sys.argv[1]):
        r = json.loads(l)
        print("   peer", r.get("case"), r.get("peer"), r.get("median_us") or r.get("us") or r.get("status"))
except Exception as e:
    print("   peers:", e)
PY
echo "== 6. ncu: nerf_mlp's kernels (durations), $(left) s left"
if command -v ncu > /dev/null; then
  for variant in on off; do
    [ "$(left)" -lt 45 ] && { echo "   skipped ncu $variant"; continue; }
    env_=""; [ $variant = off ] && env_="SOLDER_GEMM_ROW_STORE=0"
    env $env_ timeout $(( $(left) > 70 ? 35 : $(left) - 10 )) ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
      --launch-count 12 "$SOLDER" run --backend cuda examples/nerf_mlp.sol > "$out/ncu-nerf-$variant.txt" 2>&1
    echo "   $variant:"; grep -E "^  [a-zA-Z_0-9]+.*\(|gpu__time_duration" "$out/ncu-nerf-$variant.txt" | sed -E 's/, Context.*//; s/ +/ /g' | paste - - | head -14
  done
fi

if command -v ncu > /dev/null && [ "$(left)" -gt 60 ]; then
  timeout 25 ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    --launch-count 4 "$SOLDER" run --backend cuda examples/linear_relu_backward.sol > "$out/ncu-lrb-on.txt" 2>&1
  echo "   linear_relu_backward (on):"; grep -E "^  [a-zA-Z_0-9]+.*\(|gpu__time_duration" "$out/ncu-lrb-on.txt" | sed -E 's/, Context.*//; s/ +/ /g' | paste - - | head -6
fi

echo "== 7. the whole GEMM device test with what is left, $(left) s left"
if [ "$(left)" -gt 25 ]; then
  timeout $(( $(left) - 5 )) "$GEMM_TEST" 2026 > "$out/test_sm90_gemm.txt" 2>&1
  echo "   rc=$? PASS=$(grep -c '^PASS' "$out/test_sm90_gemm.txt") FAIL=$(grep -c '^FAIL' "$out/test_sm90_gemm.txt") (rc 124: cut by the deadline)"
  grep '^FAIL' "$out/test_sm90_gemm.txt" | head -5
fi
echo "== done after $(( $(date +%s) - start )) s"
[ -n "${PACK:-}" ] && tar czf "$PACK" -C "$out" . && echo "packed $PACK"
