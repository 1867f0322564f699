#!/usr/bin/env bash
# One device call for work tiles claimed from a counter (issue 17, branch attn-chain): causal hd64 S 1k on
# Config::Dynamic (new) against the snake's fixed rounds (old, SOLDER_ATTN_DYNAMIC=0), interleaved, with
# cuDNN SDPA and the unchanged cells (vanilla / gqa hd64 S 1k, causal hd64 S 4k, vanilla / causal hd128
# S 1k) in the same call.
#   0. the attention skeleton's device test (a prebuilt binary; the Dynamic cases against their static
#      configurations, bit for bit), under a timeout,
#   1. vanilla, causal, gqa (small, paper, ragged, causal S 4k), sliding_window, prefix_lm verified through
#      `solder run --backend cuda` (float64 reference),
#   2. causal hd64 S 1k: new / old interleaved, three rounds,
#   3. cuDNN SDPA on the cells (bench/peers.py, CUDA graph replays, median),
#   4. Solder's default on the unchanged cells (and vanilla S 512: 4 key tiles per work tile),
#   5. the other kernels the default changes (sliding_window S 1k / 4k, prefix_lm S 1k): new / old,
#   6. SOLDER_ATTN_DYNAMIC=1 on vanilla / gqa S 1k (not the default there),
#   7. cuDNN's causal kernel: name, grid, block, registers (torch.profiler),
#   8. one ncu of causal hd64 S 1k (new), under DEADLINE.
#
#   bench/attention/chain_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: chain_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-145}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

runs=${VERIFY:-"examples/causal.sol --small|examples/causal.sol|examples/causal.sol --dim B=2 --dim H=3 --dim S=1000|examples/causal.sol --dim B=1 --dim H=2 --dim S=4096|examples/vanilla.sol --small|examples/vanilla.sol|examples/gqa.sol --small|examples/gqa.sol|examples/gqa.sol --dim B=3 --dim S=700|examples/sliding_window.sol|examples/prefix_lm.sol"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
want = ["causal-d64-s1024", "vanilla-d64-s1024", "gqa-d64-s1024", "causal-d64-s4096", "vanilla-d128-s1024", "causal-d128-s1024",
        "sliding_window-d64-s1024", "sliding_window-d64-s4096", "prefix_lm-d64-s1024"]
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for i in want:
    c = cases[i]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
# not a suite cell: vanilla with 4 key tiles per work tile on the S 1k schedule (2048 alike work tiles), a
# second point for the fixed cost per work tile against the cost per key tile
print("vanilla-d64-s512", "examples/vanilla.sol --dim B=32 --dim S=512 --dim D=64 --dim H=16")
PY
grep -E '^causal-d64-s1024 ' "$out/bench-cases.txt" > "$out/bench-causal.txt"
grep -E '^(vanilla|gqa)-d64-s1024 |^causal-d64-s4096 |-d128-|^vanilla-d64-s512 ' "$out/bench-cases.txt" > "$out/bench-same.txt"
grep -E '^(sliding_window|prefix_lm)-' "$out/bench-cases.txt" > "$out/bench-other.txt"
grep -E '^(vanilla|gqa)-d64-s1024 ' "$out/bench-cases.txt" > "$out/bench-unmasked.txt"
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
{
  cut -d' ' -f2- "$out/bench-cases.txt" | cat "$out/runs.txt" - | sed "s|^|$bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-causal.txt" "$out/bench-other.txt" | sed "s|^|SOLDER_ATTN_DYNAMIC=0 $bin bench --compile-only |"
  cut -d' ' -f2- "$out/bench-unmasked.txt" | sed "s|^|SOLDER_ATTN_DYNAMIC=1 $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 75 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   dynamic cases: $(grep -c ' Dy ' "$out/device-test.txt") (failed: $(grep -E '^FAIL' "$out/device-test.txt" | grep -c ' Dy '))"
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
    old) line=$(SOLDER_ATTN_DYNAMIC=0 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
    dyn) line=$(SOLDER_ATTN_DYNAMIC=1 timeout 30 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
echo "== 2. causal hd64 S 1k: new / old interleaved, three rounds ($(left) s left)"
for round in 1 2 3; do
  while read -r id args; do
    if [ "$round" = 1 ]; then order="new old"; elif [ "$round" = 2 ]; then order="old new"; else order="new old"; fi
    for mode in $order; do bench_one $mode "$id" $args; done
  done < "$out/bench-causal.txt"
done
echo "== 3. cuDNN on the cells ($(left) s left)"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 20 ))" python3 bench/peers.py --suite attention \
    --cases '^((vanilla|causal|gqa)-d64-s1024|causal-d64-s4096|(vanilla|causal)-d128-s1024)$' --peers sdpa_cudnn \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings 2>&1 | grep -E "µs|error|limit" | head -10
fi
echo "== 4. Solder's default on the unchanged cells ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 20 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one new "$id" $args
done < "$out/bench-same.txt"
echo "== 5. the other kernels the default changes: new / old ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 15 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in new old; do bench_one $mode "$id" $args; done
done < "$out/bench-other.txt"
echo "== 6. SOLDER_ATTN_DYNAMIC=1 on the unmasked S 1k cells ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 12 ]; then echo "   deadline: stopped before $id"; break; fi
  bench_one dyn "$id" $args
done < "$out/bench-unmasked.txt"
echo "== 7. cuDNN's causal kernel ($(left) s left)"
if [ "$(left)" -gt 12 ]; then
  timeout "$(( $(left) - 5 ))" python3 "$here/cudnn_kernels.py" > "$out/cudnn-kernels.txt" 2>&1
  cat "$out/cudnn-kernels.txt" | tail -n 6
fi
echo "== 8. ncu of causal hd64 S 1k, new ($(left) s left)"
if [ "$(left)" -gt 20 ]; then
  read -r id args < "$out/bench-causal.txt"
  timeout "$(( $(left) - 3 ))" ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section LaunchStats "$bin" bench $args --replays 1 > "$out/ncu-causal.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|No Eligible|Warp Cycles Per Issued|Registers Per|Eligible Warps" "$out/ncu-causal.txt" | head -12
fi

python3 "$here/modes_table.py" "$out/solder.jsonl" "$out/peers.jsonl" --modes new,old,dyn --peer sdpa_cudnn > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
