#!/usr/bin/env bash
# One device call for staggered consumers (issue 17, branch attn-pingpong): vanilla, gqa and causal at
# S 1k hd64, the new schedule (consumer 1 two turns behind consumer 0, 6-stage ring) against the
# previous one, cuDNN SDPA in the same call.
#   0. the attention skeleton's device test (a prebuilt binary; the staggered cases: ragged S,
#      seq_q != seq_k, GQA, causal, many work tiles per block, each bound of the stagger), under a
#      timeout (a deadlock would hang it),
#   1. vanilla, causal, gqa, sliding_window and prefix_lm verified through `solder run --backend cuda`
#      (float64 reference) at small and paper sizes and ragged S,
#   2. `solder bench` of the S 1k cells, schedules interleaved per cell: new (default: Stagger 2, 6
#      stages), old (SOLDER_ATTN_STAGGER=0: the previous Config, 4 stages), l1 (Stagger 1, 6 stages),
#      o6 (no stagger, 6 stages: the ring depth alone),
#   3. cuDNN SDPA on the S 1k cells (bench/peers.py, CUDA graph replays, median),
#   4. a second round of new / old on the S 1k cells,
#   5. the other kernels the default changes (sliding_window S 1k / 4k / 16k, prefix_lm S 1k): new / old,
#   6. l3 (Stagger 3) on the S 1k cells, under DEADLINE.
#
#   bench/attention/pingpong_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: pingpong_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-145}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

runs=${VERIFY:-"examples/vanilla.sol --small|examples/vanilla.sol|examples/vanilla.sol --dim B=2 --dim H=3 --dim S=1000|examples/causal.sol --small|examples/causal.sol|examples/causal.sol --dim B=2 --dim H=3 --dim S=1000|examples/gqa.sol --small|examples/gqa.sol|examples/gqa.sol --dim B=3 --dim S=700|examples/sliding_window.sol|examples/prefix_lm.sol"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(r"^((vanilla|gqa|causal)-d64-s1024|sliding_window-d64-s(1024|4096|16384)|prefix_lm-d64-s1024)$", c.id):
        print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
grep -E '^(vanilla|gqa|causal)-' "$out/bench-cases.txt" > "$out/bench-short.txt"
grep -vE '^(vanilla|gqa|causal)-' "$out/bench-cases.txt" > "$out/bench-other.txt"
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
{
  cut -d' ' -f2- "$out/bench-cases.txt" | cat "$out/runs.txt" - | sed "s|^|$bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-cases.txt" | sed "s|^|SOLDER_ATTN_STAGGER=0 $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-short.txt" | sed "s|^|SOLDER_ATTN_STAGGER=1 $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-short.txt" | sed "s|^|SOLDER_ATTN_STAGGER=0 SOLDER_ATTN_STAGES=6 $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-short.txt" | sed "s|^|SOLDER_ATTN_STAGGER=3 $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 60 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   staggered cases: $(grep -c ' St[0-9]' "$out/device-test.txt") (failed: $(grep -E '^FAIL' "$out/device-test.txt" | grep -c ' St[0-9]'))"
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  timeout 30 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2
  shift 2
  local line
  case $mode in
    new) line=$(timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    old) line=$(SOLDER_ATTN_STAGGER=0 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    l1) line=$(SOLDER_ATTN_STAGGER=1 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    o6) line=$(SOLDER_ATTN_STAGGER=0 SOLDER_ATTN_STAGES=6 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    l3) line=$(SOLDER_ATTN_STAGGER=3 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
echo "== 2. solder bench: S 1k cells, four schedules interleaved ($(left) s left)"
while read -r id args; do
  for mode in new old l1 o6; do bench_one $mode "$id" $args; done
done < "$out/bench-short.txt"
echo "== 3. cuDNN on the S 1k cells ($(left) s left)"
if [ "$(left)" -gt 25 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases '^(vanilla|causal|gqa)-d64-s1024$' --peers sdpa_cudnn \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 15 ))" --no-ceilings 2>&1 | grep -E "µs|error|limit" | head -10
fi
echo "== 4. second round new / old ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 30 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in old new; do bench_one $mode "$id" $args; done
done < "$out/bench-short.txt"
echo "== 5. the other kernels the default changes: new / old ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 15 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in new old; do bench_one $mode "$id" $args; done
done < "$out/bench-other.txt"
echo "== 6. Stagger 3 ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 8 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one l3 "$id" $args
done < "$out/bench-short.txt"

python3 "$here/pingpong_table.py" "$out/solder.jsonl" "$out/peers.jsonl" > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
