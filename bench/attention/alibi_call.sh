#!/usr/bin/env bash
# One device call for ALiBi's one-FFMA score and short-row schedule (issue 17, branch attn-alibi): alibi
# hd64 at S 1k / 4k / 16k, new (the default: the row shift, one FFMA per score; vanilla's short-row
# schedule at S 1k) against old (SOLDER_ATTN_AFFINE=two SOLDER_ATTN_SHORT=old: two FFMA per score, one
# 192-row block per work tile), interleaved, with FlexAttention in the same call.
#   0. the attention skeleton's device test, the affine cases only (argv[2] filter "affine": the row
#      shift and the two-FFMA form against the float64 reference, no mask and causal, ragged S, GQA,
#      w and c != 0, S 2048 and 4096), under a timeout,
#   1. alibi verified through `solder run --backend cuda` (float64 reference): small, paper, S 4k, S 16k,
#   2. `solder bench` of the three cells, new / old interleaved (round 1),
#   3. FlexAttention on the S 1k and 16k cells (bench/peers.py, CUDA graph replays, median),
#   4. round 2 of new / old (reverse order),
#   5. FlexAttention on S 4k, SOLDER_ATTN_CONSUMERS=2 at S 4k / 16k (two consumers on long rows), alibi
#      D 128 verified, each under DEADLINE (the next step starts only with enough time left).
#
#   bench/attention/alibi_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: alibi_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-100}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

runs=${VERIFY:-"examples/alibi.sol --small|examples/alibi.sol|examples/alibi.sol --dim B=4 --dim S=4096|examples/alibi.sol --dim B=1 --dim S=16384"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for i in ["alibi-d64-s1024", "alibi-d64-s4096", "alibi-d64-s16384"]:
    c = cases[i]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
grep -vE '^alibi-d64-s1024 ' "$out/bench-cases.txt" > "$out/bench-long.txt"
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
{
  cut -d' ' -f2- "$out/bench-cases.txt" | cat "$out/runs.txt" - | sed "s|^|$bin bench --compile-only |"
  echo "$bin bench --compile-only examples/alibi.sol --dim D=128"
  cut -d' ' -f2- "$out/bench-cases.txt" | sed "s|^|SOLDER_ATTN_AFFINE=two SOLDER_ATTN_SHORT=old $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-long.txt" | sed "s|^|SOLDER_ATTN_CONSUMERS=2 $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test, affine cases"
  timeout 30 "$test_bin" 2026 affine > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
verify_one() {  # args
  local args=$1
  timeout 20 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
}
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 60 ]; then echo "   deadline: stopped before $args"; break; fi
  verify_one "$args"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2
  shift 2
  local line
  case $mode in
    new) line=$(timeout 20 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    old) line=$(SOLDER_ATTN_AFFINE=two SOLDER_ATTN_SHORT=old timeout 20 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    c2) line=$(SOLDER_ATTN_CONSUMERS=2 timeout 20 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
flex() {  # $1 case regex, $2 seconds to keep
  timeout "$(( $(left) - $2 + 5 ))" python3 bench/peers.py --suite attention --cases "$1" --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - $2 - 10 ))" --no-ceilings >> "$out/peers.log" 2>&1
  grep -E "flex .* µs|error|limit" "$out/peers.log" | tail -n 3
}
echo "== 2. alibi new / old, round 1 ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 35 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in new old; do bench_one $mode "$id" $args; done
done < "$out/bench-cases.txt"
echo "== 3. FlexAttention on S 1k and 16k ($(left) s left)"
[ "$(left)" -gt 25 ] && flex '^alibi-d64-s(1024|16384)$' 8
echo "== 4. alibi old / new, round 2 ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 8 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in old new; do bench_one $mode "$id" $args; done
done < "$out/bench-cases.txt"
echo "== 5. FlexAttention S 4k, two consumers on long rows, D 128 verified ($(left) s left)"
[ "$(left)" -gt 22 ] && flex '^alibi-d64-s4096$' 4
while read -r id args; do
  if [ "$(left)" -lt 6 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one c2 "$id" $args
done < "$out/bench-long.txt"
[ "$(left)" -gt 8 ] && verify_one "examples/alibi.sol --dim D=128"

python3 "$here/modes_table.py" "$out/solder.jsonl" "$out/peers.jsonl" --modes new,old,c2 --peer flex > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
