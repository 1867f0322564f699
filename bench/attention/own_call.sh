#!/usr/bin/env bash
# One device call for causal S 1k's fixed cost per work tile (issue 17, branch causal-own), run on the
# device from a mini repository root staged by bench/attention/own_stage.sh (build/solder, bin/
# test_sm90_attention, bin/bench_attention, examples/, bench/, COMMIT) with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=150 bash bench/attention/own_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. clock stamps per work tile (bench_attention stamps: causal hd64 S 1k, vanilla hd64 S 1k, each also
#      with free consumers, causal hd64 S 4k; stamped output bit-identical to the
#      plain kernel's, both timed) and their table (stamps_table.py);
#   2. the skeleton's device test: the free-consumer cases ("Fr": bit for bit against the same Config
#      with turns, and the float64 reference), then a sample of the rest ("d64 s4 P Q2"), each line
#      stamped with its second, under timeouts; beside it (3.)
#   3. `solder run --backend cuda` of causal / vanilla / gqa: small (the emitter's own schedule) by
#      default, paper sizes and ragged causal with SOLDER_ATTN_FREE=1 (the default kernels are unchanged);
#   4. causal hd64 S 1k / S 4k, vanilla / gqa hd64 S 1k, causal hd128 S 1k: default (old) and
#      SOLDER_ATTN_FREE=1 (new), interleaved: round 1, then
#   5. cuDNN SDPA on the same cells (bench/peers.py, CUDA graph replays, median), then round 2;
#   6. one ncu of causal hd64 S 1k, if time is left.
# Everything lands in $OUT/r (tarred to $OUT/r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; r=$O/r; mkdir -p "$r/stamps"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
# each line prefixed with the seconds since the call started
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device.txt"
bin=build/solder
[ -f bin/test_sm90_attention.gz ] && gunzip -f bin/test_sm90_attention.gz

python3 - > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
want = ["causal-d64-s1024", "vanilla-d64-s1024", "gqa-d64-s1024", "causal-d64-s4096", "causal-d128-s1024"]
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for i in want:
    c = cases[i]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
runs="old examples/causal.sol --small|old examples/vanilla.sol --small|old examples/gqa.sol --small|new examples/causal.sol|new examples/causal.sol --dim B=2 --dim H=3 --dim S=1000|new examples/vanilla.sol|new examples/gqa.sol"
echo "$runs" | tr '|' '\n' > "$r/runs.txt"
{
  cut -d' ' -f2- "$r/cases.txt" | sed "s|^|$bin bench --compile-only |"
  cut -d' ' -f2- "$r/cases.txt" | sed "s|^|SOLDER_ATTN_FREE=1 $bin bench --compile-only |"
  grep '^new ' "$r/runs.txt" | cut -d' ' -f2- | sed "s|^|SOLDER_ATTN_FREE=1 $bin bench --compile-only |"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. clock stamps ($(left) s left)"
timeout 45 bin/bench_attention stamps "$r/stamps" 2>&1 | stamp_lines | tee "$r/stamps-run.txt"
python3 bench/attention/stamps_table.py "$r"/stamps/stamps_*.bin --json "$r/stamps.json" > "$r/stamps.md" 2>&1
grep -E "^(clock|fit|mean work)" "$r/stamps.md" | head -12
gzip -q "$r"/stamps/*.bin

echo "== 2. device test, and 3. solder run beside it ($(left) s left)"
(
  : > "$r/verify.tsv"
  while read -r mode args; do
    env_free=""; [ "$mode" = new ] && env_free="SOLDER_ATTN_FREE=1"
    env $env_free timeout 40 "$bin" run --backend cuda $args > "$r/verify-one.log" 2>&1
    rc=$?
    printf '%s\t%s\trc %s\t%s\n' "$mode" "$args" "$rc" "$(grep -v '^$' "$r/verify-one.log" | tail -n 1 | cut -c1-120)" >> "$r/verify.tsv"
    [ $rc -ne 0 ] && cat "$r/verify-one.log" >> "$r/verify-fail.log"
  done < "$r/runs.txt"
) &
verify_pid=$!
timeout 35 stdbuf -oL bin/test_sm90_attention 2026 Fr 2>&1 | stamp_lines > "$r/dt-free.txt"
rc=${PIPESTATUS[0]}
echo "   free: rc $rc; $(grep -c ' OK ' "$r/dt-free.txt") OK, $(grep -c 'FAIL' "$r/dt-free.txt") FAIL; $(tail -n 1 "$r/dt-free.txt" | cut -c1-150)"
timeout 12 stdbuf -oL bin/test_sm90_attention 2026 "d64 s4 P Q2" 2>&1 | stamp_lines > "$r/dt-sample.txt"
rc=${PIPESTATUS[0]}
echo "   sample: rc $rc; $(grep -c ' OK ' "$r/dt-sample.txt") OK, $(grep -c 'FAIL' "$r/dt-sample.txt") FAIL; $(tail -n 1 "$r/dt-sample.txt" | cut -c1-150)"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait "$verify_pid"
echo "== 3. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -4

echo "== 4. Solder: default (old) and free consumers (new), interleaved, round 1 ($(left) s left)"
: > "$r/solder.jsonl"
bench_one() {  # $1 mode, $2 case id, rest: args
  local mode=$1 id=$2 line
  shift 2
  if [ "$mode" = new ]; then line=$(SOLDER_ATTN_FREE=1 timeout 20 "$bin" bench "$@" --json 2>>"$r/solder.err" | tail -n 1)
  else line=$(timeout 20 "$bin" bench "$@" --json 2>>"$r/solder.err" | tail -n 1); fi
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
round 1 45

echo "== 5. cuDNN on the cells ($(left) s left)"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 15 ))" python3 bench/peers.py --suite attention \
    --cases '^((vanilla|causal|gqa)-d64-s1024|causal-d64-s4096|causal-d128-s1024)$' --peers sdpa_cudnn \
    --out "$r/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings > "$r/peers.log" 2>&1
  grep -E "µs" "$r/peers.log" | head -6
fi
echo "== 4b. round 2 ($(left) s left)"
round 2 8

echo "== 6. ncu of causal hd64 S 1k ($(left) s left)"
if [ "$(left)" -gt 18 ]; then
  read -r id args < "$r/cases.txt"
  timeout "$(( $(left) - 4 ))" ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats "$bin" bench $args --replays 1 > "$r/ncu-causal.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|No Eligible|Warp Cycles Per Issued|Eligible Warps" "$r/ncu-causal.txt" | head -8
fi

python3 bench/attention/modes_table.py "$r/solder.jsonl" "$r/peers.jsonl" --modes new,old --peer sdpa_cudnn > "$r/summary.md" 2>&1
tar czf "$O/r.tgz" -C "$O" r
echo "== done in $(( $(date +%s) - start )) s"
cat "$r/stamps.md" | grep -E "^###|^fit|^mean work" ; cat "$r/summary.md"
