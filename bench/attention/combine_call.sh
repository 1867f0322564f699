#!/usr/bin/env bash
# One device call for issue 17's diff_attn cells (branch diff-combine, fourteenth session): the dual kernel's
# staged combine (each consumer half of the columns, x exchanged at shared addresses, λ read once per row,
# 16-byte row stores) on persistent blocks (the default: DualConfig<..., true, true, QBuffers>), against
# the staged combine on one block per work tile (st: SOLDER_ATTN_DUAL_PERSISTENT=0) and the previous
# kernel (old: SOLDER_ATTN_DUAL_COMBINE=pairs). Run on the device from a mini repository root staged by
# bench/attention/combine_stage.sh (build/solder, bin/test_sm90_attention_dual, examples/, bench/, COMMIT)
# with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=132 bash bench/attention/combine_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core), and FlexAttention
#      max-autotune compiled and autotuned once for the cells (3 replays; its numbers from this pass are
#      not used: it runs beside the tests), both in the background; Solder's timing waits for it (until
#      95 s are left);
#   1. the dual mode's device test, every case (the new staged / persistent ones compare bit for bit with
#      the pair-by-pair combine), and beside it
#   2. `solder run --backend cuda` (float64 reference) of diff_attn small, paper, hd128, S 4k, and S 896
#      (a partial last round of persistent blocks) at hd64 and hd128, four at a time;
#   3. `solder bench` of every (cell, setting), round 1 (the default first in each cell);
#   4. FlexAttention max-autotune on the four cells, alone on the GPU (compiled in step 0);
#   5. round 2 (the default last; S 16k left out), then one ncu of the S 1k default kernel.
# Everything lands in $OUT/r (tarred to $OUT/r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; r=$O/r; mkdir -p "$r"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-132} - ($(date +%s) - start) )); }
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device.txt"
bin=build/solder
cells='^diff_attn-d(64-s(1024|4096|16384)|128-s1024)$'

knobs() {
  case $1 in
    def) echo "" ;;
    st) echo "SOLDER_ATTN_DUAL_PERSISTENT=0" ;;
    old) echo "SOLDER_ATTN_DUAL_COMBINE=pairs" ;;
    DP) echo "SOLDER_ATTN_DUAL=1" ;;
  esac
}
cat > "$r/timed.txt" <<'EOT'
diff_attn-d64-s1024 def st old
diff_attn-d64-s4096 def st old
diff_attn-d128-s1024 def st old
diff_attn-d64-s16384 def DP
EOT
python3 - "$r/timed.txt" > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open(sys.argv[1]):
    c = cases[line.split()[0]]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
args_of() { grep "^$1 " "$r/cases.txt" | cut -d' ' -f2-; }
printf '%s\n' "def|examples/diff_attn.sol" "def|examples/diff_attn.sol --dim D=128" "def|$(args_of diff_attn-d64-s4096)" \
  "def|examples/diff_attn.sol --dim B=3 --dim S=896 --dim H=8" "def|examples/diff_attn.sol --dim B=3 --dim S=896 --dim H=8 --dim D=128" \
  "st|examples/diff_attn.sol" "st|examples/diff_attn.sol --dim D=128" "def|examples/diff_attn.sol --small" > "$r/runs.txt"
{
  while read -r id modes; do
    for m in $modes; do echo "$(knobs "$m") $bin bench --compile-only $(args_of "$id")"; done
  done < "$r/timed.txt"
  while IFS='|' read -r m args; do echo "$(knobs "$m") $bin bench --compile-only $args"; done < "$r/runs.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!
# FlexAttention: compiled and autotuned now (TORCHINDUCTOR_CACHE_DIR: peers.py's .cache/inductor), timed in step 4
PYTHONUNBUFFERED=1 timeout 75 python3 bench/peers.py --no-ceilings --out "$r/peers-warm.jsonl" --suite attention --cases "$cells" \
  --peers flex --time-limit 70 --reps 3 > "$r/peers-warm.log" 2>&1 < /dev/null &
flex_pid=$!

echo "== 1. dual device test (every case) and 2. solder run beside it ($(left) s left)"
verify_stream() {  # $1: stream index (0..3): every fourth line of runs.txt
  awk -v k="$1" 'NR % 4 == k' "$r/runs.txt" | while IFS='|' read -r m args; do
    if [ "$(left)" -lt 85 ]; then printf '%s\t%s\tskipped (deadline)\n' "$m" "$args"; continue; fi
    env $(knobs "$m") timeout 40 "$bin" run --backend cuda $args > "$r/verify-$1.log" 2>&1 < /dev/null
    rc=$?
    printf '%s\t%s\trc %s\t%s\n' "$m" "$args" "$rc" "$(grep -v '^$' "$r/verify-$1.log" | tail -n 1 | cut -c1-140)"
    [ $rc -ne 0 ] && cat "$r/verify-$1.log" >> "$r/verify-fail.log"
  done > "$r/verify-$1.tsv"
}
vpids=()
for k in 0 1 2 3; do verify_stream $k & vpids+=($!); done
timeout 30 stdbuf -oL bin/test_sm90_attention_dual 2026 2>&1 | stamp_lines > "$r/dt-dual.txt"
rc=${PIPESTATUS[0]}
echo "   dual: rc $rc; $(grep -c ' OK ' "$r/dt-dual.txt") OK ($(grep -c ' OK .*staged' "$r/dt-dual.txt") staged, $(grep -c ' OK .*persistent' "$r/dt-dual.txt") persistent), $(grep -c 'FAIL' "$r/dt-dual.txt") FAIL; $(tail -n 1 "$r/dt-dual.txt" | cut -c1-150)"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait "${vpids[@]}"
cat "$r"/verify-[0123].tsv > "$r/verify.tsv" 2> /dev/null
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -6

: > "$r/solder.jsonl"
bench_one() {  # $1 setting, $2 case id, $3 round
  local m=$1 id=$2 line
  line=$(env $(knobs "$m") timeout 15 "$bin" bench $(args_of "$id") --json 2>>"$r/solder.err" < /dev/null | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$m\", \"round\": $3, \"t\": $(( $(date +%s) - start )), \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$m] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: 1 (the default first) or 2 (the default last, S 16k left out), $2: seconds to leave
  { [ "$1" = 1 ] && cat "$r/timed.txt" || grep -v "^diff_attn-d64-s16384 " "$r/timed.txt"; } | while read -r id modes; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id (round $1)"; break; }
    order=$modes
    [ "$1" = 2 ] && order="$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')"
    for m in $order; do bench_one "$m" "$id" "$1"; done
  done
}
# the warm-up pass off the GPU before Solder is timed (waited for until 95 s are left)
while kill -0 "$flex_pid" 2> /dev/null && [ "$(left)" -gt 95 ]; do sleep 1; done
kill -0 "$flex_pid" 2> /dev/null && echo "   (Flex's warm-up pass still runs: round 1 shares the GPU with it)"
echo "== 3. Solder, round 1 ($(left) s left)"
round 1 55
echo "== 4. FlexAttention max-autotune, alone ($(left) s left)"
if kill -0 "$flex_pid" 2> /dev/null; then echo "   the warm-up pass is still running: waited for"; wait "$flex_pid"; fi
echo "   warm-up pass: $(grep -c '"ok"' "$r/peers-warm.jsonl" 2> /dev/null) records ($(left) s left)"
if [ "$(left)" -gt 35 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 25 )) python3 bench/peers.py --no-ceilings --out "$r/peers.jsonl" \
    --suite attention --cases "$cells" --peers flex --time-limit 60 >> "$r/peers.log" 2>&1 < /dev/null
  echo "   Flex rc $? ($(left) s left)"
fi
echo "== 5. Solder, round 2 ($(left) s left)"
round 2 12
if [ "$(left)" -gt 18 ] && command -v ncu > /dev/null; then
  echo "== ncu, diff_attn S 1k, the default kernel ($(left) s left)"
  timeout $(( $(left) - 4 )) ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis "$bin" bench $(args_of diff_attn-d64-s1024) --replays 1 > "$r/ncu-s1024.txt" 2>&1
  echo "   ncu rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued|Eligible Warps|Active Warps" "$r/ncu-s1024.txt" | head -14
fi

python3 - "$r" <<'PY' | tee "$r/summary.md"
import json, sys, statistics, collections
r = sys.argv[1]
t = collections.defaultdict(list)
for l in open(f"{r}/solder.jsonl"):
    d = json.loads(l)
    if d["result"]: t[(d["case"], d["mode"])].append(d["result"]["median_us"])
flex = {}
for name in ("peers.jsonl", "peers-warm.jsonl"):
    try:
        for l in open(f"{r}/{name}"):
            d = json.loads(l)
            if d.get("peer") == "flex" and d.get("median_us"): flex.setdefault(d["case"], (d["median_us"], name))
    except FileNotFoundError: pass
print("| cell | setting | rounds (µs) | mean | / old | Flex MA (µs) | / Flex |")
print("|---|---|---|---|---|---|---|")
for (case, mode), v in t.items():
    m = statistics.mean(v); o = t.get((case, "old")); f = flex.get(case)
    fs = f"{f[0]:.1f}" + (" (warm-up pass)" if f and f[1] != "peers.jsonl" else "") if f else "—"
    print(f"| {case} | {mode} | {', '.join('%.1f' % x for x in v)} | {m:.1f} | {('%.3f' % (m / statistics.mean(o))) if o else '—'} | {fs} | {('%.3f' % (m / f[0])) if f else '—'} |")
PY
tar czf "$O/r.tgz" -C "$O" r
echo "== done ($(left) s left)"
