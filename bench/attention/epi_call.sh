#!/usr/bin/env bash
# One device call for the staged epilogue (issue 17, branch attn-epi: O through shared memory, 16-byte
# row stores; SOLDER_ATTN_EPI=1), run on the device from a mini repository root staged by
# bench/attention/own_stage.sh (build/solder, bin/test_sm90_attention(.gz), examples/, bench/, COMMIT)
# with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=95 bash bench/attention/epi_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test: the staged-epilogue cases ("Ep": bit for bit against the same Config
#      with the per-pair stores, and the float64 reference), then a short sample of the rest ("d64 s4 P
#      Q2"), each line stamped with its second, under timeouts; beside it
#   2. `solder run --backend cuda` with SOLDER_ATTN_EPI=1: causal / vanilla / gqa small and paper,
#      causal ragged S 1000, causal hd128;
#   3. causal / vanilla / gqa hd64 S 1k and causal hd128 S 1k: SOLDER_ATTN_EPI=0 (old) and =1 (new),
#      interleaved: round 1 (new first), then
#   4. cuDNN SDPA on the same cells (bench/peers.py, CUDA graph replays, median), then round 2 (old first);
#   5. one ncu of causal hd64 S 1k (new), if time is left.
# Everything lands in $OUT/r (tarred to $OUT/r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; r=$O/r; mkdir -p "$r"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-95} - ($(date +%s) - start) )); }
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device.txt"
bin=build/solder
[ -f bin/test_sm90_attention.gz ] && gunzip -f bin/test_sm90_attention.gz

python3 - > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
want = ["causal-d64-s1024", "vanilla-d64-s1024", "gqa-d64-s1024", "causal-d128-s1024"]
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for i in want:
    c = cases[i]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
runs="examples/causal.sol --small|examples/vanilla.sol --small|examples/gqa.sol --small|examples/causal.sol --dim B=2 --dim H=3 --dim S=1000|examples/causal.sol|examples/vanilla.sol|examples/gqa.sol|examples/causal.sol --dim D=128 --dim S=1024"
echo "$runs" | tr '|' '\n' > "$r/runs.txt"
{
  cut -d' ' -f2- "$r/cases.txt" | sed "s|^|SOLDER_ATTN_EPI=1 $bin bench --compile-only |"
  cut -d' ' -f2- "$r/cases.txt" | sed "s|^|SOLDER_ATTN_EPI=0 $bin bench --compile-only |"
  sed "s|^|SOLDER_ATTN_EPI=1 $bin bench --compile-only |" "$r/runs.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. device test, and 2. solder run beside it ($(left) s left)"
(
  : > "$r/verify.tsv"
  while read -r args; do
    [ "$(left)" -lt 58 ] && { printf '%s\tskipped (deadline)\n' "$args" >> "$r/verify.tsv"; continue; }
    SOLDER_ATTN_EPI=1 timeout 25 "$bin" run --backend cuda $args > "$r/verify-one.log" 2>&1
    rc=$?
    printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$r/verify-one.log" | tail -n 1 | cut -c1-140)" >> "$r/verify.tsv"
    [ $rc -ne 0 ] && cat "$r/verify-one.log" >> "$r/verify-fail.log"
  done < "$r/runs.txt"
) &
verify_pid=$!
timeout 34 stdbuf -oL bin/test_sm90_attention 2026 Ep 2>&1 | stamp_lines > "$r/dt-epi.txt"
rc=${PIPESTATUS[0]}
echo "   Ep: rc $rc; $(grep ' OK ' "$r/dt-epi.txt" | grep -c ' Ep ') Ep OK, $(grep -c ' OK ' "$r/dt-epi.txt") OK in all, $(grep -c 'FAIL' "$r/dt-epi.txt") FAIL; $(tail -n 1 "$r/dt-epi.txt" | cut -c1-150)"
timeout 5 stdbuf -oL bin/test_sm90_attention 2026 "d64 s4 P Q2" 2>&1 | stamp_lines > "$r/dt-sample.txt"
rc=${PIPESTATUS[0]}
echo "   sample: rc $rc; $(grep -c ' OK ' "$r/dt-sample.txt") OK, $(grep -c 'FAIL' "$r/dt-sample.txt") FAIL"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait "$verify_pid"
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -4

echo "== 3. Solder: SOLDER_ATTN_EPI=0 (old) and =1 (new), interleaved, round 1 ($(left) s left)"
: > "$r/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2 line knob=0
  shift 2
  [ "$mode" = new ] && knob=1
  line=$(SOLDER_ATTN_EPI=$knob timeout 15 "$bin" bench "$@" --json 2>>"$r/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: the round (1: new first, 2: old first), $2: seconds to leave for what follows
  while read -r id args; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id (round $1)"; break; }
    if [ "$1" = 1 ]; then order="new old"; else order="old new"; fi
    for mode in $order; do bench_one $mode "$id" $args; done
  done < "$r/cases.txt"
}
round 1 25

echo "== 4. cuDNN on the cells ($(left) s left)"
if [ "$(left)" -gt 22 ]; then
  timeout "$(( $(left) - 12 ))" python3 bench/peers.py --suite attention \
    --cases '^((vanilla|causal|gqa)-d64-s1024|causal-d128-s1024)$' --peers sdpa_cudnn \
    --out "$r/peers.jsonl" --time-limit "$(( $(left) - 16 ))" --no-ceilings > "$r/peers.log" 2>&1
  grep -E "µs" "$r/peers.log" | head -5
fi
echo "== 3b. round 2 ($(left) s left)"
round 2 6

echo "== 5. ncu of causal hd64 S 1k, new ($(left) s left)"
if [ "$(left)" -gt 16 ]; then
  read -r id args < "$r/cases.txt"
  SOLDER_ATTN_EPI=1 timeout "$(( $(left) - 3 ))" ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis "$bin" bench $args --replays 1 > "$r/ncu-causal-new.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|No Eligible|Warp Cycles Per Issued|Memory Throughput" "$r/ncu-causal-new.txt" | head -8
fi

python3 bench/attention/modes_table.py "$r/solder.jsonl" "$r/peers.jsonl" --modes new,old --peer sdpa_cudnn > "$r/summary.md" 2>&1
tar czf "$O/r.tgz" -C "$O" r
echo "== done in $(( $(date +%s) - start )) s"
cat "$r/summary.md"
