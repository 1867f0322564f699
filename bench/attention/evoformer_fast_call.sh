#!/usr/bin/env bash
# One device call for evoformer with the staged bias (issues 17/15, branch evoformer-fast): the producer
# TMA-loads the pair-bias tile and the mask bytes into each K stage; the consumers read them from
# shared memory.
#   0. the attention skeleton's device test (a prebuilt binary: the staged-bias cases),
#   1. evoformer verified through the CUDA backend at small and paper sizes (float64 reference),
#   2. `solder bench` of B1/B8/B32 D64 and B8 D128 (Solder first), B1/B8 D32, and the A/B variants of B8
#      D64: one block per work tile ($SOLDER_ATTN_PERSISTENT=0) and the previous per-score global reads
#      ($SOLDER_ATTN_BIAS_GLOBAL=1),
#   3. a short ncu of B8 D64,
#   4. the peers in the same call: FlexAttention, torch.compile (mode default), cuDNN SDPA (dense bias).
#
#   bench/attention/evoformer_fast_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# DEADLINE (seconds, default 225) bounds the whole script: no step starts without the time it needs.
set -uo pipefail
out=${1:?usage: evoformer_fast_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-225}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 60 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | cut -c1-200 | head -8
fi
verify=(
  "examples/evoformer.sol --small --dim D=64"
  "examples/evoformer.sol --small --dim D=32 --dim S2=64"
  "examples/evoformer.sol --small --dim D=64 --dim S2=192 --dim S1=3"
  "examples/evoformer.sol --small --dim D=128 --dim S2=128"
  "examples/evoformer.sol --small --dim D=64 --dim S2=72 --dim S1=3"
  "examples/evoformer.sol"
  "examples/evoformer.sol --dim D=32"
  "examples/evoformer.sol --dim D=128"
  "examples/evoformer.sol --dim B=2 --dim S1=8 --dim H=3 --dim D=64"
)
benches=(
  "evoformer-b1-d64|--dim B=1"
  "evoformer-b8-d64|--dim B=8"
  "evoformer-b32-d64|--dim B=32"
  "evoformer-b8-d128|--dim B=8 --dim D=128"
  "evoformer-b1-d32|--dim B=1 --dim D=32"
  "evoformer-b8-d32|--dim B=8 --dim D=32"
)
echo "== compile (NVRTC, in parallel)"
{
  for a in "${verify[@]}"; do echo "$bin bench --compile-only $a"; done
  for b in "${benches[@]}"; do echo "$bin bench --compile-only examples/evoformer.sol ${b#*|}"; done
  echo "SOLDER_ATTN_PERSISTENT=0 $bin bench --compile-only examples/evoformer.sol --dim B=8"
  echo "SOLDER_ATTN_BIAS_GLOBAL=1 $bin bench --compile-only examples/evoformer.sol --dim B=8"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"
echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
for a in "${verify[@]}"; do
  timeout 40 "$bin" run --backend cuda $a > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$a" "$rc" "$(grep -E 'output o|verified|error|FAIL' "$out/verify.log" | tr '\n' ' ' | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$a" | tr ' /=' '___').log"
done
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of ${#verify[@]}"
echo "== 2. solder bench ($(left) s left)"
: > "$out/solder.jsonl"
bench() {  # id, env, dims
  local id=$1 env=$2 dims=$3
  line=$(env $env timeout 40 "$bin" bench examples/evoformer.sol $dims --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"env\": \"$env\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  printf '   %-22s %-28s %s\n' "$id" "$env" "$(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
for b in "${benches[@]}"; do bench "${b%%|*}" "X=1" "${b#*|}"; done
bench evoformer-b8-d64 SOLDER_ATTN_PERSISTENT=0 "--dim B=8"
bench evoformer-b8-d64 SOLDER_ATTN_BIAS_GLOBAL=1 "--dim B=8"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ "$(left)" -gt 120 ]; then
  echo "== 3. ncu: evoformer B8 D64 ($(left) s left)"
  m=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct
  m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_selected_per_warp_active.pct
  m=$m,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  m=$m,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
  timeout 40 "$NCU" --section SpeedOfLight --section WarpStateStats --metrics "$m" \
    -k regex:fused --launch-count 1 "$bin" run --backend cuda examples/evoformer.sol --dim B=8 > "$out/ncu-b8-d64.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput|stalled|gmma|pipe_xu|pipe_fma|hit_rate|dram__bytes|bank_conflicts|Registers|ERR" "$out/ncu-b8-d64.txt" | cut -c1-140 | head -24
fi
echo "== 4. peers ($(left) s left)"
peer() {  # peers, cases
  [ "$(left)" -lt 25 ] && { echo "   deadline: not run: $1 $2"; return; }
  timeout "$(( $(left) - 5 ))" python3 bench/peers.py --suite attention --cases "$2" --peers "$1" --compile-mode default \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings 2>&1 | grep -E "^evoformer|rror" | cut -c1-150
}
peer flex '^evoformer-b(1|8)-d64$'
peer compile '^evoformer-b(1|8)-d64$'
peer flex '^evoformer-b8-d128$'
peer flex '^evoformer-b32-d64$'
peer sdpa_cudnn '^evoformer-b8-d64$'
peer compile '^evoformer-b8-d128$'
echo "== all done in $(( $(date +%s) - start )) s"
