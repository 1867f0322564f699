#!/usr/bin/env bash
# The second, shorter device call of branch attn-short (issue 17): what the first (short_call.sh) left
# unmeasured.
#   1. `solder bench` A/B of the two Q buffers on the other short masked kernels that now take them
#      (sliding_window at S 1k / 4k / 16k, prefix_lm at S 1k; hd64): the default against
#      SOLDER_ATTN_QBUFFERS=1, interleaved per cell,
#   2. the S 4k / 16k cells of vanilla, causal and gqa (their Config unchanged by the branch),
#   3. cuDNN SDPA on those cells in the same call (bench/peers.py, CUDA graph replays, median),
#   4. with time left, causal S 4k with SOLDER_ATTN_SHORT=all (this branch's schedule at S 4k).
#
#   bench/attention/short_check.sh OUTDIR SOLDER_BINARY
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: short_check.sh OUTDIR SOLDER}
bin=${2:?solder binary}
deadline=${DEADLINE:-130}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
order = ["sliding_window-d64-s1024", "sliding_window-d64-s4096", "sliding_window-d64-s16384", "prefix_lm-d64-s1024"]
order += [i for i in cases if re.search(r"^(vanilla|causal|gqa)-d(64|128)-s(4096|16384)$", i)]
for i in order:
    c = cases[i]
    print(i, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
grep -E '^(sliding_window|prefix_lm)-' "$out/bench-cases.txt" > "$out/bench-ab.txt"
grep -vE '^(sliding_window|prefix_lm)-' "$out/bench-cases.txt" > "$out/bench-long.txt"
{
  cut -d' ' -f2- "$out/bench-cases.txt" | sed "s|^|$bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-ab.txt" | sed "s|^|SOLDER_ATTN_QBUFFERS=1 $bin bench --compile-only |"
  grep -E '^causal-d(64|128)-s4096 ' "$out/bench-long.txt" | cut -d' ' -f2- | sed "s|^|SOLDER_ATTN_SHORT=all $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2
  shift 2
  local line
  case $mode in
    new) line=$(timeout 40 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    q1) line=$(SOLDER_ATTN_QBUFFERS=1 timeout 40 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    all) line=$(SOLDER_ATTN_SHORT=all timeout 40 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
echo "== 1. two Q buffers on sliding_window / prefix_lm: default against SOLDER_ATTN_QBUFFERS=1"
while read -r id args; do
  for mode in new q1; do bench_one $mode "$id" $args; done
done < "$out/bench-ab.txt"
echo "== 2. the S 4k / 16k cells ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 40 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one new "$id" $args
done < "$out/bench-long.txt"
echo "== 3. cuDNN on them ($(left) s left)"
if [ "$(left)" -gt 15 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases '^(vanilla|causal|gqa)-d(64|128)-s(4096|16384)$' --peers sdpa_cudnn \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 8 ))" --no-ceilings 2>&1 | grep -E "µs|error|limit" | head -20
fi
if [ "$(left)" -gt 10 ]; then
  echo "== 4. causal S 4k with SOLDER_ATTN_SHORT=all ($(left) s left)"
  grep -E '^causal-d(64|128)-s4096 ' "$out/bench-long.txt" | while read -r id args; do
    [ "$(left)" -gt 5 ] && bench_one all "$id" $args
  done
fi
python3 "$here/short_table.py" "$out/solder.jsonl" "$out/peers.jsonl" > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
