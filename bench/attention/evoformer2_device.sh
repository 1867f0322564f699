#!/usr/bin/env bash
# evoformer2's check (issues 17/15): the staged-bias evoformer kernel with the gate preloaded, a 6-stage
# ring and one round's heads per group (the query tiles of a head in one round), verified and timed,
# Solder first (with A/B variants at B8 D64: the gate read at the store, 4 stages), then the peers in
# the same call: FlexAttention in peers.py's GPU default mode (max-autotune-no-cudagraphs: Flex fails
# in mode "default" on evoformer), torch.compile in mode "default" and cuDNN SDPA; a short ncu of B8
# D64 last. At most ~225 s. Run from the repo root on the device machine:
#
#   SOLDER=build/solder ATTN_TEST=build-attn/test_sm90_attention \
#   SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/gemm/cutlass bash bench/attention/evoformer2_device.sh
#
# SOLDER: the tree's solder (default build/solder). ATTN_TEST (optional): the attention skeleton's
# device test, built on the host with
#   OUT_BIN=1 BUILD=build-attn SOLDER_CUTLASS_INCLUDE=... bash tests/gpu/attention_skeleton/compile_check.sh test
# Results under $OUT/evoformer2/ (or ./evoformer2-out). Prints PASS/FAIL lines, then TIME lines.
set -uo pipefail
bin=${SOLDER:-build/solder}
out=${OUT:-.}/evoformer2
[ -n "${OUT:-}" ] || out=./evoformer2-out
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( ${DEADLINE:-228} - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
echo "device: $(cat "$out/device.txt")"
verify=(
  "examples/evoformer.sol"
  "examples/evoformer.sol --small"
  "examples/evoformer.sol --dim D=32"
  "examples/evoformer.sol --dim D=128"
  "examples/evoformer.sol --dim B=2 --dim S1=8 --dim H=3 --dim D=64"
  "examples/evoformer.sol --small --dim D=64 --dim S2=192 --dim S1=3"
  "examples/evoformer.sol --small --dim D=64 --dim S2=264 --dim S1=5 --dim H=3"
)
benches=("b8-d64|--dim B=8" "b1-d64|--dim B=1" "b8-d128|--dim B=8 --dim D=128")
variants=("b8-d64-gate-at-store|--dim B=8|SOLDER_ATTN_EPILOGUE_PRELOAD=0" "b8-d64-4-stages|--dim B=8|SOLDER_ATTN_STAGES=4"
          "b8-d128-gate-at-store|--dim B=8 --dim D=128|SOLDER_ATTN_EPILOGUE_PRELOAD=0")
# Every kernel compiled first, in parallel (NVRTC), while the device test runs.
{
  for a in "${verify[@]}"; do echo "$bin bench --compile-only $a"; done
  for b in "${benches[@]}"; do echo "$bin bench --compile-only examples/evoformer.sol ${b#*|}"; done
  for b in "${variants[@]}"; do r=${b#*|}; echo "${r#*|} $bin bench --compile-only examples/evoformer.sol ${r%%|*}"; done
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "${ATTN_TEST:-}" ] && [ -x "${ATTN_TEST:-}" ]; then
  timeout 60 "$ATTN_TEST" 2026 > "$out/device-test.txt" 2>&1
  rc=$?
  echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) attention skeleton device test: $(tail -n 1 "$out/device-test.txt") (staged-bias cases: $(grep -c '^OK .*staged' "$out/device-test.txt") OK, gated: $(grep -c '^OK .*gate' "$out/device-test.txt") OK)"
  grep -E "^FAIL" "$out/device-test.txt" | cut -c1-160 | head -5
fi
wait $compile_pid
echo "compiled in $(( $(date +%s) - start )) s"
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
time_one() {  # id, dims, env, limit
  local line
  line=$(env $3 timeout "$4" "$bin" bench examples/evoformer.sol $2 --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"evoformer-$1\", \"env\": \"$3\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "TIME solder evoformer-$1: $(echo "${line:-null}" | us) us"
}
for b in "${benches[@]}"; do time_one "${b%%|*}" "${b#*|}" X=1 30; done
for b in "${variants[@]}"; do r=${b#*|}; time_one "${b%%|*}" "${r%%|*}" "${r#*|}" 30; done
[ "$(left)" -gt 170 ] && time_one b32-d64 "--dim B=32" X=1 50
echo "solder done at $(( $(date +%s) - start )) s"
if [ "$(left)" -gt 40 ]; then
  timeout "$(( $(left) - 30 ))" python3 bench/peers.py --suite attention --cases '^evoformer-b(8|1)-d64$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 50 ))" --no-ceilings > "$out/peers-flex.txt" 2>&1
  grep -E "^evoformer" "$out/peers-flex.txt" | awk '{print "TIME peer", $0}' | cut -c1-140
fi
if [ "$(left)" -gt 35 ]; then
  timeout "$(( $(left) - 25 ))" python3 bench/peers.py --suite attention --cases '^evoformer-b8-d(64|128)$' --peers compile,sdpa_cudnn \
    --compile-mode default --out "$out/peers-default.jsonl" --time-limit "$(( $(left) - 40 ))" --no-ceilings > "$out/peers-default.txt" 2>&1
  grep -E "^evoformer" "$out/peers-default.txt" | awk '{print "TIME peer(default mode)", $0}' | cut -c1-150
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$(left)" -gt 20 ] && [ -n "$NCU" ]; then
  m=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct
  m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_selected_per_warp_active.pct
  m=$m,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum
  timeout "$(( $(left) - 5 ))" "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics "$m" \
    -k regex:fused --launch-count 1 "$bin" run --backend cuda examples/evoformer.sol --dim B=8 > "$out/ncu-b8.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|stalled|gmma|hit_rate|dram__bytes|inst_executed|Registers|Achieved Occ|ERR" "$out/ncu-b8.txt" | cut -c1-140 | head -20
fi
echo "done in $(( $(date +%s) - start )) s"
