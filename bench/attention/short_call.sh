#!/usr/bin/env bash
# One device call for the short-sequence cells of vanilla, gqa and causal (issue 17, branch attn-short):
#   0. the attention skeleton's device test (a prebuilt binary: two Q buffers on persistent blocks, many
#      work tiles per block, 1 and 3 blocks, ragged S, seq_q != seq_k, GQA, causal incl. work tiles
#      with no key tile),
#   1. vanilla, causal and gqa verified through `solder run --backend cuda` (float64 reference) at
#      small and paper sizes, hd128, ragged S (1000, 700) and causal S 4k,
#   2. `solder bench` of the suite's S 1k cells, three schedules interleaved per cell: the default
#      (persistent blocks, 2 Q buffers), SOLDER_ATTN_QBUFFERS=1 (persistent, one Q buffer) and
#      SOLDER_ATTN_SHORT=old (the previous choice),
#   3. cuDNN SDPA and FlexAttention on the S 1k cells (bench/peers.py, CUDA graph replays, median),
#   4. the S 4k / 16k cells (default only: their kernels are the previous ones; at S 4k also
#      SOLDER_ATTN_SHORT=all: this schedule at that length), 5. cuDNN on them, under DEADLINE,
#   6. with NCU=1 and time left: ncu of vanilla S1k (default schedule).
#
#   bench/attention/short_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: short_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-200}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

runs=${VERIFY:-"examples/vanilla.sol --small|examples/vanilla.sol|examples/vanilla.sol --dim D=128|examples/vanilla.sol --dim B=2 --dim H=3 --dim S=1000|examples/causal.sol --small|examples/causal.sol|examples/causal.sol --dim D=128|examples/causal.sol --dim B=2 --dim H=3 --dim S=1000|examples/causal.sol --dim B=1 --dim S=4096|examples/gqa.sol --small|examples/gqa.sol|examples/gqa.sol --dim B=3 --dim S=700"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(r"^(vanilla|causal|gqa)-d(64|128)-s(1024|4096|16384)$", c.id):
        print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
grep -- '-s1024 ' "$out/bench-cases.txt" > "$out/bench-short.txt"
{ grep -- '-s4096 ' "$out/bench-cases.txt"; grep -- '-s16384 ' "$out/bench-cases.txt"; } > "$out/bench-long.txt"
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
{
  cut -d' ' -f2- "$out/bench-cases.txt" | cat "$out/runs.txt" - | sed "s|^|$bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-short.txt" | sed "s|^|SOLDER_ATTN_QBUFFERS=1 $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-short.txt" | sed "s|^|SOLDER_ATTN_SHORT=old $bin bench --compile-only |"
  grep -- '-s4096 ' "$out/bench-long.txt" | cut -d' ' -f2- | sed "s|^|SOLDER_ATTN_SHORT=all $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 90 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   two-Q-buffer cases: $(grep -c ' Q2' "$out/device-test.txt"), many-tile cases: $(grep -c ' many ' "$out/device-test.txt")"
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  timeout 60 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 2. solder bench: S 1k cells, three schedules interleaved ($(left) s left)"
: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2
  shift 2
  local line
  case $mode in
    new) line=$(timeout 60 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    q1) line=$(SOLDER_ATTN_QBUFFERS=1 timeout 60 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    old) line=$(SOLDER_ATTN_SHORT=old timeout 60 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    all) line=$(SOLDER_ATTN_SHORT=all timeout 60 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
while read -r id args; do
  for mode in new q1 old; do bench_one $mode "$id" $args; done
done < "$out/bench-short.txt"
echo "== 3. peers on the S 1k cells ($(left) s left)"
if [ "$(left)" -gt 25 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases '^(vanilla|causal|gqa)-d(64|128)-s1024$' --peers sdpa_cudnn,flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings 2>&1 | grep -E "µs|error|limit" | head -20
fi
echo "== 4. solder bench of the S 4k / 16k cells ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 45 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one new "$id" $args
  case $id in *-s4096) bench_one all "$id" $args ;; esac
done < "$out/bench-long.txt"

echo "== 5. cuDNN on the S 4k / 16k cells ($(left) s left)"
if [ "$(left)" -gt 20 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases '^(vanilla|causal|gqa)-d(64|128)-s(4096|16384)$' --peers sdpa_cudnn \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 12 ))" --no-ceilings 2>&1 | grep -E "µs|error|limit" | head -20
fi
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "${NCU:-0}" = 1 ] && [ -n "$NCU_BIN" ] && [ "$(left)" -gt 15 ]; then
  echo "== 6. ncu of vanilla S1k (default schedule)"
  timeout 25 "$NCU_BIN" --section SpeedOfLight --section WarpStateStats --section LaunchStats -k regex:fused -c 1 \
    "$bin" run --backend cuda examples/vanilla.sol > "$out/ncu-vanilla-s1k.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Grid Size|Warp Cycles" "$out/ncu-vanilla-s1k.txt" | head -12
fi

python3 "$here/short_table.py" "$out/solder.jsonl" "$out/peers.jsonl" > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
