#!/usr/bin/env bash
# One device call for issue 17's variants (branch attn-variants, 2026-11-27, ninth session):
#   diff_attn at head dim 128 as two kernels (the combine o = a0 − λ·a1 in the second pass's epilogue),
#   the epilogue's reads of a0 / λ through the read-only path, and prefix_lm's boundary tiles on the
#   one-interval row form (`col < PRE || col <= row` is [0, max(PRE − 1, row)] on every row).
#   1. every touched variant verified through `solder run --backend cuda` (float64 reference) at small,
#      paper, S 4k (and S 16k / D 128) sizes; causal at S 4k (its one-interval rows, unchanged),
#   2. `solder bench` of the suite's diff_attn (hd64, hd128) and prefix_lm cells,
#   3. FlexAttention, then cuDNN SDPA, on the same cells in the same call (peers.py, CUDA-graph replays,
#      median) until DEADLINE,
#   4. with time left: ncu of diff_attn hd128 S1024's second pass.
#
#   bench/attention/variants2_call.sh OUTDIR SOLDER_BINARY
#
# Env: DEADLINE (seconds from the start after which no new step starts; default 200), CASES, VERIFY.
set -uo pipefail
out=${1:?usage: variants2_call.sh OUTDIR SOLDER}
bin=${2:?solder binary}
deadline=${DEADLINE:-200}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
v() { printf '%s|' "$@"; }
runs=${VERIFY:-$(v \
  "examples/diff_attn.sol --small" "examples/diff_attn.sol" "examples/diff_attn.sol --dim D=128" \
  "examples/diff_attn.sol --small --dim D=128" "examples/diff_attn.sol --dim B=1 --dim S=4096 --dim D=128" \
  "examples/diff_attn.sol --dim B=1 --dim S=4096" \
  "examples/prefix_lm.sol --small" "examples/prefix_lm.sol" "examples/prefix_lm.sol --dim B=4 --dim S=4096" \
  "examples/prefix_lm.sol --dim B=1 --dim S=16384" "examples/prefix_lm.sol --dim D=128 --dim B=2" \
  "examples/prefix_lm.sol --dim B=1 --dim H=2 --dim S=640 --dim PRE=200" \
  "examples/causal.sol --dim B=4 --dim S=4096")}
echo "${runs%|}" | tr '|' '\n' > "$out/runs.txt"
cases=${CASES:-'^(diff_attn-d(64|128)|prefix_lm-d64)-s(1024|4096|16384)$'}
python3 - "$cases" > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(sys.argv[1], c.id):
        print(c.id, c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
# Every kernel of the call compiled first, in parallel (NVRTC, one per core).
{
  sed "s|^|$bin bench --compile-only |" "$out/runs.txt"
  while read -r id workload dims; do echo "$bin bench --compile-only examples/$workload.sol $dims"; done < "$out/bench-cases.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  t0=$(date +%s%N)
  timeout 60 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 2. solder bench, $(left) s left"
: > "$out/solder.jsonl"
while read -r id workload dims; do
  if [ "$(left)" -lt 70 ]; then echo "   deadline: stopped before $id"; break; fi
  line=$(timeout 60 "$bin" bench "examples/$workload.sol" $dims --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us, %.0f TFLOP/s, %s kernels" % (r["median_us"], r.get("tflops", 0), r.get("kernels", "?")))
except Exception as e: print("failed", e)')"
done < "$out/bench-cases.txt"

echo "== 3. peers, $(left) s left"
for peer in flex sdpa_cudnn; do
  [ "$(left)" -lt 25 ] && break
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases "$cases" --peers "$peer" \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings 2>&1 | grep -v '^#' | tail -n 12
done
if [ "$(left)" -gt 25 ] && command -v ncu > /dev/null; then
  echo "== 4. ncu of diff_attn hd128 S1024 (second pass)"
  timeout "$(( $(left) - 5 ))" ncu --section SpeedOfLight --section Occupancy --section LaunchStats -k regex:fused_o -c 1 \
    "$bin" run --backend cuda examples/diff_attn.sol --dim D=128 > "$out/ncu.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Grid Size" "$out/ncu.txt" | head -12
fi
echo "== done in $(( $(date +%s) - start )) s"
