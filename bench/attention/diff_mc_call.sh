#!/usr/bin/env bash
# One device call for issue 17's diff_attn cells (branch diff-mc, fifteenth session): the dual kernel in
# clusters of two with K/V multicast (SOLDER_ATTN_DUAL_CLUSTER=2) against the single-block persistent dual
# kernel. A wrapper of bench/merged_call.sh (which times the spots of bench/attention/diff_mc.spots and
# writes the table) for the steps it lacks: FlexAttention max-autotune's compile and autotune pass started
# first in the background, the dual device test and `solder run` with the knobs beside it, Flex timed alone
# before the spots. Run on the device from the mini repository root of bench/merged_stage.sh, CuTe in
# ../cutlass:
#   cd <root> && DEADLINE=125 bash bench/attention/diff_mc_call.sh
#
#   0. every kernel of the spots and of step 2 compiled in parallel (NVRTC, the cache merged_call.sh's
#      own compile pass then hits), and FlexAttention max-autotune compiled and autotuned on the cells
#      (3 replays, not used), both in the background;
#   1. the dual device test, every case (the cluster cases compare bit for bit with single blocks);
#   2. `solder run --backend cuda` (float64 reference) with the cluster kernel: diff_attn small, paper,
#      S 4k, S 16k (forced dual), hd128 paper, and B3 S 960 at hd64 / hd128 (15 work tiles per head: a
#      pair with a rank past seq_q; partial last rounds), four at a time;
#   3. FlexAttention max-autotune timed alone (after step 0's pass) into peers.jsonl;
#   4. bench/merged_call.sh with the spots (DEVICE_TESTS="" RUN_SH=0), its table;
#   5. with time left, one ncu of the S 4k cluster kernel.
# Work in /tmp/mc/r; $OUT gets r.tgz (refreshed after every step) and summary.md.
set -uo pipefail
FINAL=${OUT:-/tmp/out}; W=/tmp/mc; r=$W/r; mkdir -p "$r" "$FINAL"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-125} - ($(date +%s) - start) )); }
snap() { tar czf "$FINAL/r.tgz" -C "$W" r 2> /dev/null; }
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device0.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device0.txt"
bin=build/solder
SPOTS=bench/attention/diff_mc.spots
cells='^diff_attn-d(64-s(1024|4096|16384)|128-s(1024|4096))$'
C2=SOLDER_ATTN_DUAL_CLUSTER=2
args_of() { python3 bench/suites.py --suite attention --cases "^$1\$" --solder-commands --out /dev/null | sed 's/.*solder bench //; s/ --json.*//'; }
printf '%s\n' "$C2|examples/diff_attn.sol --small" "$C2|examples/diff_attn.sol" "$C2|$(args_of diff_attn-d64-s4096)" \
  "$C2 SOLDER_ATTN_DUAL=1|$(args_of diff_attn-d64-s16384)" "$C2|examples/diff_attn.sol --dim D=128" \
  "$C2|examples/diff_attn.sol --dim B=3 --dim S=960 --dim H=8" "$C2|examples/diff_attn.sol --dim B=3 --dim S=960 --dim H=8 --dim D=128" > "$r/runs.txt"
{
  grep -v '^\s*\(#\|$\)' "$SPOTS" | while read -r tag suite cases peers plimit envs; do
    python3 bench/suites.py --suite "$suite" --cases "$cases" --solder-commands --compile-only --timeout 120 --out /dev/null | sed "s|^|${envs:+$envs }|"
  done
  while IFS='|' read -r env args; do echo "$env $bin bench --compile-only $args"; done < "$r/runs.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile0.log" 2>&1 &
compile_pid=$!
PYTHONUNBUFFERED=1 timeout 80 python3 bench/peers.py --no-ceilings --out "$r/peers-warm.jsonl" --suite attention --cases "$cells" \
  --peers flex --time-limit 72 --reps 3 > "$r/peers-warm.log" 2>&1 < /dev/null &
flex_pid=$!

echo "== 1. dual device test and 2. solder run beside it ($(left) s left)"
verify_stream() {  # $1: every fourth line of runs.txt
  awk -v k="$1" 'NR % 4 == k' "$r/runs.txt" | while IFS='|' read -r env args; do
    if [ "$(left)" -lt 75 ]; then printf '%s\t%s\tskipped (deadline)\n' "$env" "$args"; continue; fi
    env $env timeout 40 "$bin" run --backend cuda $args > "$r/verify-$1.log" 2>&1 < /dev/null
    rc=$?
    printf '%s\t%s\trc %s\t%s\n' "$env" "$args" "$rc" "$(grep -v '^$' "$r/verify-$1.log" | tail -n 1 | cut -c1-140)"
    [ $rc -ne 0 ] && cat "$r/verify-$1.log" >> "$r/verify-fail.log"
  done > "$r/verify-$1.tsv"
}
timeout 40 stdbuf -oL bin/test_sm90_attention_dual 2026 2>&1 | stamp_lines > "$r/dt-dual.txt"
rc=${PIPESTATUS[0]}
# a cluster case that hangs (the first call of this script, 2026-11-28: setmaxnreg beyond the launch's
# registers) would hang every cluster run after it: the timings then go on without the cluster kernel
if [ "$rc" = 124 ]; then
  echo "   the dual test hung: no cluster kernel from here on"
  grep -v "$C2" "$r/runs.txt" > "$r/runs-kept.txt"; mv "$r/runs-kept.txt" "$r/runs.txt"
  grep -v "CLUSTER=2" "$SPOTS" > "$W/spots-kept"; SPOTS=$W/spots-kept
fi
echo "   dual: rc $rc; $(grep -c ' OK ' "$r/dt-dual.txt") OK ($(grep -c ' OK .*cluster' "$r/dt-dual.txt") cluster), $(grep -c 'FAIL' "$r/dt-dual.txt") FAIL; $(tail -n 1 "$r/dt-dual.txt" | cut -c1-150)"
grep -h "FAIL" "$r/dt-dual.txt" | head -5
snap
vpids=()
for k in 0 1 2 3; do verify_stream $k & vpids+=($!); done
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile0.log")"
wait "${vpids[@]}"
cat "$r"/verify-[0123].tsv > "$r/verify.tsv" 2> /dev/null
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -6
snap

while kill -0 "$flex_pid" 2> /dev/null && [ "$(left)" -gt 78 ]; do sleep 1; done
kill -0 "$flex_pid" 2> /dev/null && { echo "   Flex's pass still runs at $(left) s left: stopped"; kill "$flex_pid"; wait "$flex_pid"; }
echo "== 3. FlexAttention max-autotune, alone ($(left) s left; warm-up pass: $(grep -c '"ok"' "$r/peers-warm.jsonl" 2> /dev/null) records)"
if [ "$(left)" -gt 62 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 50 )) python3 bench/peers.py --no-ceilings --out "$r/peers.jsonl" \
    --suite attention --cases "$cells" --peers flex --time-limit $(( $(left) - 58 )) > "$r/peers.log" 2>&1 < /dev/null
  echo "   Flex rc $? ($(left) s left): $(grep -c '"ok"' "$r/peers.jsonl" 2> /dev/null) records"
else
  echo "   skipped: too little time left"
fi
snap

echo "== 4. the spots through bench/merged_call.sh ($(left) s left)"
# merged_call.sh starts a spot line only with 60 s of its DEADLINE left: its deadline is ours + 52 (a
# line of four cells takes ≈ 10 s)
OUT=$W DEVICE_TESTS="" RUN_SH=0 SPOTS=$SPOTS DEADLINE=$(( $(left) + 52 )) timeout $(( $(left) - 3 )) bash bench/merged_call.sh 2>&1 | tail -n 40
python3 bench/merged_table.py "$r" > "$r/summary.md" 2> /dev/null
snap

if [ "$(left)" -gt 16 ] && command -v ncu > /dev/null; then
  echo "== 5. ncu, diff_attn S 4k, the cluster kernel ($(left) s left)"
  env $C2 timeout $(( $(left) - 3 )) ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis "$bin" bench $(args_of diff_attn-d64-s4096) --replays 1 > "$r/ncu-s4096.txt" 2>&1
  echo "   ncu rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issued Warp|No Eligible|Eligible Warps" "$r/ncu-s4096.txt" | head -10
fi
snap
cp "$r/summary.md" "$FINAL/summary.md" 2> /dev/null
echo "== done ($(left) s left)"
cat "$r/summary.md"
