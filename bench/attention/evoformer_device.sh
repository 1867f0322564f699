#!/usr/bin/env bash
# evoformer-fast's check for the merged tree (issues 17/15): the staged-bias evoformer kernel verified
# and timed, Solder first (with the A/B variants at B8 D64: the per-score global reads, one block per
# work tile), then FlexAttention in the same call. At most ~120 s. Run from the repo root on
# the device machine:
#
#   SOLDER=build/solder ATTN_TEST=build-attn/test_sm90_attention \
#   SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/gemm/cutlass bash bench/attention/evoformer_device.sh
#
# SOLDER: the merged tree's solder (default build/solder). ATTN_TEST (optional): the attention
# skeleton's device test, built on the host with
#   OUT_BIN=1 BUILD=build-attn SOLDER_CUTLASS_INCLUDE=... bash tests/gpu/attention_skeleton/compile_check.sh test
# Results under $OUT/evoformer-fast/ (or ./evoformer-fast-out). Prints PASS/FAIL lines, then the timings.
set -uo pipefail
bin=${SOLDER:-build/solder}
out=${OUT:-.}/evoformer-fast
[ -n "${OUT:-}" ] || out=./evoformer-fast-out
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( ${DEADLINE:-115} - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > "$out/device.txt" 2>&1
if [ -n "${ATTN_TEST:-}" ] && [ -x "${ATTN_TEST:-}" ]; then
  timeout 40 "$ATTN_TEST" 2026 > "$out/device-test.txt" 2>&1
  rc=$?
  echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) attention skeleton device test: $(tail -n 1 "$out/device-test.txt") (staged-bias cases: $(grep -c '^OK .*staged' "$out/device-test.txt") OK)"
  grep -E "^FAIL" "$out/device-test.txt" | cut -c1-160 | head -5
fi
verify=(
  "examples/evoformer.sol"
  "examples/evoformer.sol --dim D=32"
  "examples/evoformer.sol --dim D=128"
  "examples/evoformer.sol --dim B=2 --dim S1=8 --dim H=3 --dim D=64"
  "examples/evoformer.sol --small --dim D=64 --dim S2=192 --dim S1=3"
)
benches=("b1-d64|--dim B=1" "b8-d64|--dim B=8" "b32-d64|--dim B=32" "b8-d128|--dim B=8 --dim D=128")
{
  for a in "${verify[@]}"; do echo "$bin bench --compile-only $a"; done
  for b in "${benches[@]}"; do echo "$bin bench --compile-only examples/evoformer.sol ${b#*|}"; done
  echo "SOLDER_ATTN_BIAS_GLOBAL=1 $bin bench --compile-only examples/evoformer.sol --dim B=8"
  echo "SOLDER_ATTN_PERSISTENT=0 $bin bench --compile-only examples/evoformer.sol --dim B=8"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
for a in "${verify[@]}"; do
  timeout 30 "$bin" run --backend cuda $a > "$out/verify.log" 2>&1
  rc=$?
  echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) verify evoformer $a: $(grep -E 'output o' "$out/verify.log" | tr -s ' ' | cut -c1-110)" | tee -a "$out/verify.txt"
  [ $rc -ne 0 ] && { cp "$out/verify.log" "$out/verify-fail-$(echo "$a" | tr ' /=' '___').log"; grep -iE "error" "$out/verify.log" | head -3; }
done
: > "$out/solder.jsonl"
us() { python3 -c 'import json,sys
try: print("%.1f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")'; }
for b in "${benches[@]}" "b8-d64-global|--dim B=8|SOLDER_ATTN_BIAS_GLOBAL=1" "b8-d64-per-tile-blocks|--dim B=8|SOLDER_ATTN_PERSISTENT=0"; do
  id=${b%%|*}; rest=${b#*|}; dims=${rest%%|*}; env=X=1; [ "$rest" != "$dims" ] && env=${rest#*|}
  line=$(env $env timeout 30 "$bin" bench examples/evoformer.sol $dims --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"evoformer-$id\", \"env\": \"$env\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "TIME solder evoformer-$id: $(echo "${line:-null}" | us) us"
done
if [ "$(left)" -gt 30 ]; then
  # FlexAttention in peers.py's default compile mode (max-autotune-no-cudagraphs: in mode "default"
  # its kernel fails with a Triton out-of-resource error on evoformer, 2026-11-27)
  timeout "$(( $(left) ))" python3 bench/peers.py --suite attention --cases '^evoformer-b(8|1)-d64$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings > "$out/peers.txt" 2>&1
  grep -E "^evoformer" "$out/peers.txt" | awk '{print "TIME peer", $1, $2, $3, $4}'
fi
echo "done in $(( $(date +%s) - start )) s"
