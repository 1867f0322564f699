#!/usr/bin/env bash
# The device call of the gemm-chains work (issue 15: gated FFN's gate and up as one dual-B launch, the
# M = 128 costs): the skeleton's device test (dual-B included), then bench/whole_session.sh (verify,
# time, peers in the same call) and an ncu profile of chosen cases, all in one call.
#
#   bench/gemm_chains_dual.sh OUTDIR CARRY_DIR
#
# SOLDER_ROOT: the checkout to run in (default: this script's). CARRY_DIR holds a stripped `solder`,
# `test_sm90_gemm` (tests/gpu/gemm/compile_check.sh with OUT_BIN=1) and libgomp.so.1. Env: CASES (suite case ids, default below), VERIFY (as whole_session.sh), PROFILE
# ('label|example|args' specs for bench/profile.sh, ';'-separated), SWEEP (below), VERIFY_CASES=1 (every
# case verified by solder run, in parallel, before timing), SOLDER_CUTLASS_INCLUDE.
set -uo pipefail
cd "${SOLDER_ROOT:-$(dirname "$0")/..}"
out=${1:?usage: bench/gemm_chains_dual.sh OUTDIR CARRY_DIR}
carry=${2:?usage: bench/gemm_chains_dual.sh OUTDIR CARRY_DIR}
mkdir -p "$out" build
cp "$carry/solder" build/solder
export SOLDER_CACHE_DIR=$PWD/build/kernel-cache
export LD_LIBRARY_PATH=$PWD/$carry:${LD_LIBRARY_PATH:-}
export CASES=${CASES:-"ffn-S1 ffn-S3 ffn-S8 ffn-G5 gated_ffn-S1 gated_ffn-S3 gated_ffn-S8 gated_ffn-G5"}
start=$(date +%s)

echo "== 0. compile cache ($(nproc) in parallel)"
sweep_compiles() {  # the sweep's programs, one per forced tile
  [ -n "${SWEEP:-}" ] || return 0
  IFS=';' read -r -a sweeps <<< "$SWEEP"
  for spec in "${sweeps[@]}"; do
    IFS='|' read -r prog dims tiles <<< "$spec"
    echo "build/solder bench $prog $dims --compile-only"
    for t in $tiles; do echo "SOLDER_GEMM_TILE=$t build/solder bench $prog $dims --compile-only"; done
  done
}
{
python3 - $CASES <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
for id in sys.argv[1:]:
    c = [c for c in suites.ALL_CASES if c.id == id][0]
    dims = " ".join(f"--dim {k}={v}" for k, v in c.overrides.items())
    print(f"build/solder bench examples/{c.workload}.sol {dims} --compile-only")
PY
sweep_compiles
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
grep -ci error "$out/compile.log" | sed 's/^/   compile errors: /'
echo "   $(( $(date +%s) - start )) s"

echo "== 1. GEMM skeleton device test (tests/gpu/gemm, dual-B included)"
timeout 150 "$carry/test_sm90_gemm" 2026 > "$out/gemm-test.log" 2>&1
echo "   rc=$? $(grep -c '^PASS' "$out/gemm-test.log") PASS, $(grep -c '^FAIL' "$out/gemm-test.log") FAIL; $(tail -n 1 "$out/gemm-test.log")"
grep '^FAIL' "$out/gemm-test.log" | head -5
grep 'dual' "$out/gemm-test.log" | head -3
echo "   $(( $(date +%s) - start )) s"

if [ -n "${VERIFY_CASES:-}" ]; then
  # Every timed case's program and sizes through `solder run --backend cuda`, all at once (the float64
  # reference runs on the CPU cores; the GPU runs are short), before any timing.
  echo "== 1b. verify every case (in parallel)"
  : > "$out/verify-cases.tsv"
  for id in $CASES; do
    (
      args=$(python3 -c "import sys; sys.path.insert(0, 'bench'); import suites; c = suites.CASES_BY_ID['$id']; print(f'examples/{c.workload}.sol ' + ' '.join(f'--dim {k}={v}' for k, v in c.overrides.items()))")
      r=$(timeout 200 build/solder run --backend cuda $args 2>&1 | tail -n 1)
      printf '%s\t%s\t%s\n' "$id" "$args" "$r" >> "$out/verify-cases.tsv"
    ) &
  done
  wait
  cat "$out/verify-cases.tsv"
  echo "   $(( $(date +%s) - start )) s"
fi

echo "== 2. bench/whole_session.sh"
if [ -n "${PROFILE:-}" ]; then
  IFS=';' read -r -a specs <<< "$PROFILE"
  quoted=""
  for s in "${specs[@]}"; do quoted="$quoted '$s'"; done
  export EXTRA="bash bench/profile.sh $out/profile $quoted"
fi
bash bench/whole_session.sh "$out" build/solder
if [ -n "${SWEEP:-}" ]; then
  # SWEEP: 'program.sol|dims|tile tile ...' specs, ';'-separated: each program timed with each tile forced
  # (SOLDER_GEMM_TILE), verified once per tile (solder run); compiled in step 0.
  echo "== 3. tile sweep (SOLDER_GEMM_TILE)"
  IFS=';' read -r -a sweeps <<< "$SWEEP"
  : > "$out/sweep.tsv"
  for spec in "${sweeps[@]}"; do
    IFS='|' read -r prog dims tiles <<< "$spec"
    for t in $tiles; do
      v=$(SOLDER_GEMM_TILE=$t timeout 60 build/solder run --backend cuda $prog $dims 2>&1 | tail -n 1)
      line=$(SOLDER_GEMM_TILE=$t timeout 60 build/solder bench $prog $dims --json 2>>"$out/sweep.err" | tail -n 1)
      us=$(echo "$line" | python3 -c 'import json,sys
try: print("%.2f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")')
      printf '%s\t%s\t%s\t%s\t%s\n' "$prog" "$dims" "$t" "$us" "$v" | tee -a "$out/sweep.tsv"
    done
    line=$(timeout 60 build/solder bench $prog $dims --json 2>>"$out/sweep.err" | tail -n 1)
    printf '%s\t%s\t%s\t%s\n' "$prog" "$dims" "model" "$(echo "$line" | python3 -c 'import json,sys
try: print("%.2f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")')" | tee -a "$out/sweep.tsv"
  done
  echo "   $(( $(date +%s) - start )) s"
fi

echo "== total $(( $(date +%s) - start )) s"
