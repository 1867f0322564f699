#!/usr/bin/env bash
# One device call for evoformer on the attention skeleton (issues 17/15/18, branch attn-evoformer):
#   0. the attention skeleton's device test (a prebuilt binary: the new bias functor, head dim 32),
#   1. evoformer verified through the CUDA backend at small and paper sizes (float64 reference; run
#      here, not by emit_session.sh's deadline-bound step),
#   2. `solder bench` of the suite's evoformer cells, Solder first, then torch.compile, FlexAttention and
#      cuDNN SDPA (dense bias) in the same call (emit_session.sh), plus Solder at head dim 32,
#   3. ncu of evoformer B8 D64 (one plain launch through `solder run`).
#
#   bench/attention/evoformer_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR (tar it into $OUT). DEADLINE (seconds, default 300) bounds steps 1-2.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: evoformer_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
mkdir -p "$out"
start=$(date +%s)
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 90 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -5
  grep -E "bias|d64\(32\)" "$out/device-test.txt" | cut -c1-150 | head -40
fi
v() { printf '%s|' "$@"; }
export VERIFY=${VERIFY:-$(v \
  "examples/evoformer.sol --small" "examples/evoformer.sol --small --dim D=32 --dim S2=64" \
  "examples/evoformer.sol --small --dim D=64 --dim S2=192 --dim S1=3" "examples/evoformer.sol --small --dim D=128 --dim S2=128" \
  "examples/evoformer.sol" "examples/evoformer.sol --dim D=32" "examples/evoformer.sol --dim D=128" \
  "examples/evoformer.sol --dim B=2 --dim S1=8 --dim H=3 --dim D=64" "examples/evoformer.sol --dim B=2 --dim S1=32")}
VERIFY=${VERIFY%|}
# The verification runs here, before emit_session.sh (whose own verify step starts only with 200 s of
# its DEADLINE left: in the first call, 2026-11-26, DEADLINE 215 left none of them run).
echo "== 1. evoformer verified through the CUDA backend (float64 reference)"
: > "$out/verify-evoformer.tsv"
echo "$VERIFY" | tr '|' '\n' > "$out/runs-evoformer.txt"
sed "s|^|$bin bench --compile-only |" "$out/runs-evoformer.txt" | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile-evoformer.log" 2>&1
while IFS= read -r args; do
  [ -z "$args" ] && continue
  timeout 90 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | grep -E 'output o|verified|error|FAIL' | tr '\n' ' ' | cut -c1-200)" | tee -a "$out/verify-evoformer.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs-evoformer.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify-evoformer.tsv") of $(wc -l < "$out/runs-evoformer.txt")"
export SKIP_VERIFY=1
unset VERIFY
export CASES=${CASES:-'^evoformer-'}
export PEERS=${PEERS:-compile,flex,sdpa_cudnn}
export DEADLINE=${DEADLINE:-300}
bash "$here/emit_session.sh" "$out" "$bin"
echo "== Solder at head dim 32 (no suite cell: B8 and B1)"
for b in 1 8; do
  line=$(timeout 45 "$bin" bench examples/evoformer.sol --dim B=$b --dim D=32 --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"evoformer-b$b-d32\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   evoformer-b$b-d32: $line" | cut -c1-200
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  m=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct
  m=$m,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct
  m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_selected_per_warp_active.pct
  m=$m,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  m=$m,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum
  echo "== ncu: evoformer B8 D64"
  timeout "${NCU_TIMEOUT:-50}" "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics "$m" \
    -k regex:fused --launch-count 1 "$bin" run --backend cuda examples/evoformer.sol --dim B=8 > "$out/ncu-b8-d64.txt" 2>&1
  grep -E "fused|Duration|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput|stalled|gmma|pipe_xu|pipe_fma|hit_rate|dram__bytes|Registers|ERR" "$out/ncu-b8-d64.txt" | cut -c1-140 | head -30
fi
echo "== all done in $(( $(date +%s) - start )) s"
