#!/usr/bin/env bash
# evoformer3's one device call (issues 15/17): the staged bias as a column sum (the mask term once per
# key column, the pair bias converted by one integer op, swizzled addresses by one XOR), two Q buffers
# beside the 6-stage ring, the gate's sigmoid as rcp.approx(1 + ex2.approx). In order, each result
# written under OUTDIR as it lands:
#   0. the attention skeleton's device test (prebuilt: the new kStagedSum + 2-Q-buffer cases, the gate
#      through fast_sigmoid against float64),
#   1. `solder run --backend cuda` of evoformer small / paper / D32 / D128 / ragged S2 (float64 reference),
#   2. `solder bench`: B8 D64, B1 D64, B8 D128 with the new binary and the old one (main's, the evoformer2
#      kernel) interleaved, then two A/B variants of the new binary at B8 D64 (one Q buffer; the staged
#      bias per score), then B32 D64 if time is left,
#   3. FlexAttention at B8 / B1 D64 and torch.compile (mode default) at B8 D64 in the same call,
#   4. one ncu of B8 D64 (new binary) if time is left.
# Every NVRTC kernel is compiled first, in parallel (one per core), while the device test runs.
#
#   bash evoformer3_device.sh OUTDIR SOLDER SOLDER_OLD [DEVICE_TEST]    (DEADLINE: seconds, default 140)
#
# Run from a folder holding examples/ and bench/*.py (the device call's .devcarry/evoformer3).
set -uo pipefail
out=${1:?usage: evoformer3_device.sh OUTDIR SOLDER SOLDER_OLD [DEVICE_TEST]}
new=${2:?new solder}
old=${3:?old solder}
test_bin=${4:-}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( ${DEADLINE:-140} - ($(date +%s) - start) )); }
log() { echo "$*" | tee -a "$out/summary.txt"; }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
log "device: $(nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader 2>&1)"
verify=(
  "examples/evoformer.sol --small"
  "examples/evoformer.sol"
  "examples/evoformer.sol --dim D=32"
  "examples/evoformer.sol --dim D=128"
  "examples/evoformer.sol --dim B=2 --dim S1=8 --dim H=3 --dim D=64"
  "examples/evoformer.sol --small --dim D=64 --dim S2=192 --dim S1=3"
  "examples/evoformer.sol --small --dim D=64 --dim S2=264 --dim S1=5 --dim H=3"
)
# id|dims|binary|env
benches=(
  "b8-d64|--dim B=8|$new|X=1" "b8-d64-old|--dim B=8|$old|X=1"
  "b1-d64|--dim B=1|$new|X=1" "b1-d64-old|--dim B=1|$old|X=1"
  "b8-d128|--dim B=8 --dim D=128|$new|X=1" "b8-d128-old|--dim B=8 --dim D=128|$old|X=1"
  "b8-d64-1q|--dim B=8|$new|SOLDER_ATTN_QBUFFERS=1" "b8-d64-per-score-bias|--dim B=8|$new|SOLDER_ATTN_STAGED_SUM=0"
)
{
  for a in "${verify[@]}"; do echo "$new bench --compile-only $a"; done
  for b in "${benches[@]}" "b32-d64|--dim B=32|$new|X=1"; do
    IFS='|' read -r id dims bin env <<< "$b"
    echo "env $env $bin bench --compile-only examples/evoformer.sol $dims"
  done
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  timeout 70 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  rc=$?
  log "$([ $rc -eq 0 ] && echo PASS || echo FAIL) attention skeleton device test (rc $rc): $(tail -n 1 "$out/device-test.txt") (sum cases: $(grep -c '^OK .* sum' "$out/device-test.txt") OK, gated: $(grep -c '^OK .*gate' "$out/device-test.txt") OK)"
  grep -E "^FAIL" "$out/device-test.txt" | cut -c1-200 | head -5 | tee -a "$out/summary.txt"
fi
wait $compile_pid
log "compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci 'error' "$out/compile.log")"
for a in "${verify[@]}"; do
  timeout 30 "$new" run --backend cuda $a > "$out/verify.log" 2>&1
  rc=$?
  log "$([ $rc -eq 0 ] && echo PASS || echo FAIL) verify $a: $(grep -E 'output o' "$out/verify.log" | tr -s ' ' | cut -c1-110)"
  [ $rc -ne 0 ] && { cp "$out/verify.log" "$out/verify-fail.log"; grep -iE "error" "$out/verify.log" | head -3; }
done
: > "$out/solder.jsonl"
us() { python3 -c 'import json,sys
try: print("%.1f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")'; }
time_one() {  # id, dims, binary, env
  local line
  line=$(env $4 timeout 25 "$3" bench examples/evoformer.sol $2 --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"evoformer-$1\", \"env\": \"$4\", \"binary\": \"$(basename "$3")\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  log "TIME solder evoformer-$1: $(echo "${line:-null}" | us) us"
}
for b in "${benches[@]}"; do
  IFS='|' read -r id dims bin env <<< "$b"
  time_one "$id" "$dims" "$bin" "$env"
done
log "solder done at $(( $(date +%s) - start )) s"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 12 ))" python3 bench/peers.py --suite attention --cases '^evoformer-b(8|1)-d64$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings > "$out/peers-flex.txt" 2>&1
  grep -E "^evoformer" "$out/peers-flex.txt" | cut -c1-130 | sed 's/^/TIME peer /' | tee -a "$out/summary.txt"
fi
if [ "$(left)" -gt 25 ]; then
  timeout "$(( $(left) - 8 ))" python3 bench/peers.py --suite attention --cases '^evoformer-b8-d64$' --peers compile \
    --compile-mode default --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings > "$out/peers-compile.txt" 2>&1
  grep -E "^evoformer" "$out/peers-compile.txt" | cut -c1-130 | sed 's/^/TIME peer(default mode) /' | tee -a "$out/summary.txt"
fi
if [ "$(left)" -gt 22 ]; then time_one b32-d64 "--dim B=32" "$new" X=1; fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$(left)" -gt 18 ] && [ -n "$NCU" ]; then
  m=smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_selected_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_barrier_per_warp_active.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,smsp__inst_executed.sum
  timeout "$(( $(left) - 3 ))" "$NCU" --section SpeedOfLight --metrics "$m" -k regex:fused --launch-count 1 \
    "$new" run --backend cuda examples/evoformer.sol --dim B=8 > "$out/ncu-b8.txt" 2>&1
  grep -E "Duration|DRAM Throughput|stalled|hit_rate|dram__bytes|inst_executed" "$out/ncu-b8.txt" | cut -c1-120 | tee -a "$out/summary.txt"
fi
log "done in $(( $(date +%s) - start )) s"
echo "==== summary"
cat "$out/summary.txt"
