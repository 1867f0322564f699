#!/usr/bin/env bash
# One device call for document_mask on persistent data-mask blocks (issue 17, branch attn-docmask2):
#   0. the attention skeleton's device test (a prebuilt binary: data masks one block per tile and on
#      persistent blocks, random document lengths incl. 1, whole tiles masked, ragged S, rows that see
#      no key, work tiles with no live key tile),
#   1. document_mask and diff_attn verified through `solder run --backend cuda` (float64 reference) at
#      small, paper and long sizes,
#   2. `solder bench` of the suite's document_mask cells with SOLDER_ATTN_PERSISTENT=0
#      (one block per work tile: the previous schedule, same binary),
#   3. with NCU=1: ncu of document_mask S1024 (one plain launch through `solder run`),
#   4. emit_session.sh: `solder bench` of the suite's document_mask and diff_attn hd64 cells (CASES), then
#      FlexAttention and cuDNN SDPA (PEERS) under DEADLINE (seconds from its start, default 90), then
#      FlexAttention's block-mask build alone (flex_docmask_build.py).
#
#   bench/attention/docmask2_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR (tar it into $OUT). VERIFY: '|'-separated `solder run` arguments instead of the list below.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: docmask2_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
mkdir -p "$out"
start=$(date +%s)
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
runs=${VERIFY:-"examples/document_mask.sol --small|examples/document_mask.sol|examples/document_mask.sol --dim B=4 --dim S=4096|examples/document_mask.sol --dim B=1 --dim S=16384|examples/document_mask.sol --dim D=128 --dim B=2|examples/diff_attn.sol"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(r"^document_mask-", c.id):
        print(f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs;
# the A/B variant (one block per work tile) too.
{
  cat "$out/runs.txt" "$out/bench-cases.txt" | sed "s|^|$bin bench --compile-only |"
  sed "s|^|SOLDER_ATTN_PERSISTENT=0 $bin bench --compile-only |" "$out/bench-cases.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 100 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  grep -c "P data" "$out/device-test.txt" | sed 's/^/   persistent data-mask cases: /'
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"
echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify-docmask.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  timeout 60 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify-docmask.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify-docmask.tsv") of $(grep -c . "$out/runs.txt")"
echo "== 2. solder bench document_mask with SOLDER_ATTN_PERSISTENT=0 (one block per work tile)"
: > "$out/ab.jsonl"
for mode in 0; do  # (the default, persistent: step 4, first, before the peers)
  while IFS= read -r args; do
    if [ "$mode" = 0 ]; then line=$(SOLDER_ATTN_PERSISTENT=0 timeout 60 "$bin" bench $args --json 2>>"$out/ab.err" | tail -n 1)
    else line=$(timeout 60 "$bin" bench $args --json 2>>"$out/ab.err" | tail -n 1); fi
    echo "{\"mode\": \"$mode\", \"args\": \"$args\", \"result\": ${line:-null}}" >> "$out/ab.jsonl"
    echo "   [$mode] $args: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
  done < "$out/bench-cases.txt"
done
NCU=${NCU:-0}
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$NCU" = 1 ] && [ -n "$NCU_BIN" ]; then
  echo "== 3. ncu of document_mask S1024"
  timeout 50 "$NCU_BIN" --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats -k regex:fused_o -c 1 \
    "$bin" run --backend cuda examples/document_mask.sol > "$out/ncu-docmask.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Grid Size|Stall|Warp Cycles" "$out/ncu-docmask.txt" | head -24
fi
export SKIP_VERIFY=1
unset VERIFY
export CASES=${CASES:-'^(document_mask-|diff_attn-d64-)'}
export PEERS=${PEERS:-flex,sdpa_cudnn}
export DEADLINE=${DEADLINE:-90}
bash "$here/emit_session.sh" "$out" "$bin"
echo "== 5. FlexAttention's block-mask build alone"
timeout 30 python3 "$here/flex_docmask_build.py" --out "$out/flex-build.jsonl" 2>&1 | tail -n 4
echo "== done in $(( $(date +%s) - start )) s"
