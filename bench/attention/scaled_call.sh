#!/usr/bin/env bash
# One device call for issue 17's FlexAttention-target variants (branch variants3, fourteenth session):
# ALiBi's scaled row shift on 3 consumers (kAffinePositiveA: one FFMA per score instead of two;
# SOLDER_ATTN_AFFINE=unscaled is the previous kernel) at alibi S 4k / 16k, prefix_lm S 4k on the Dynamic
# two-Q-buffer kernel of the masks of two comparisons (SOLDER_ATTN_TWO_LONG=0: the previous 3-consumer
# kernel; POSTED: with the posted work-tile setup), alibi S 1k with free consumers + the staged epilogue
# (FE, never timed). Run on the device from a mini repository root staged by
# bench/attention/scaled_stage.sh (build/solder, bin/test_sm90_attention.gz, examples/, bench/, COMMIT)
# with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=140 bash bench/attention/scaled_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test: the new "scaled" affine cases (3 consumers, against the float64
#      reference), the same Config's other affine cases, then a short sample;
#   2. beside it, `solder run --backend cuda` (float64 reference) of the changed kernels at their cells'
#      sizes, ragged and small sizes, four at a time;
#   3. `solder bench` of every (cell, setting), round 1 (the default first in each cell);
#   4. FlexAttention in max-autotune (peers.py's default) on the changed cells;
#   5. round 2 (the default last; not alibi S 1k), one ncu of the new alibi S 4k kernel, then Flex on alibi S 16k.
# Everything lands in $OUT/r (tarred to $OUT/r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; r=$O/r; mkdir -p "$r"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-140} - ($(date +%s) - start) )); }
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device.txt"
bin=build/solder
[ -f bin/test_sm90_attention.gz ] && gunzip -f bin/test_sm90_attention.gz

knobs() {
  case $1 in
    def) echo "" ;;
    old) echo "SOLDER_ATTN_AFFINE=unscaled" ;;
    old2) echo "SOLDER_ATTN_TWO_LONG=0" ;;
    PW) echo "SOLDER_ATTN_POSTED=1" ;;
    FE) echo "SOLDER_ATTN_FREE=1 SOLDER_ATTN_EPI=1" ;;
  esac
}
cat > "$r/timed.txt" <<'EOT'
alibi-d64-s4096 def old
prefix_lm-d64-s4096 def old2 PW
alibi-d64-s1024 def FE
alibi-d64-s16384 def old
EOT
python3 - "$r/timed.txt" > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open(sys.argv[1]):
    c = cases[line.split()[0]]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
args_of() { grep "^$1 " "$r/cases.txt" | cut -d' ' -f2-; }
# verification: the changed kernels at the cells' sizes, ragged and small; the FE setting
printf '%s\n' "def|$(args_of alibi-d64-s4096)" "def|$(args_of prefix_lm-d64-s4096)" \
  "def|examples/alibi.sol --dim B=1 --dim H=4 --dim S=3000" "def|examples/prefix_lm.sol --dim B=2 --dim H=4 --dim S=3000" \
  "def|examples/alibi.sol --small" "def|examples/prefix_lm.sol --small" "PW|$(args_of prefix_lm-d64-s4096)" \
  "def|$(args_of alibi-d64-s16384)" "FE|$(args_of alibi-d64-s1024)" "def|examples/diff_attn.sol --small" \
  "def|examples/alibi.sol" "def|examples/prefix_lm.sol" > "$r/runs.txt"
{
  while read -r id modes; do
    for m in $modes; do echo "$(knobs "$m") $bin bench --compile-only $(args_of "$id")"; done
  done < "$r/timed.txt"
  while IFS='|' read -r m args; do echo "$(knobs "$m") $bin bench --compile-only $args"; done < "$r/runs.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. device test (scaled, then the rest of its Config's affine cases, a sample), and 2. solder run beside it ($(left) s left)"
verify_stream() {  # $1: stream index (0..3): every fourth line of runs.txt
  awk -v k="$1" 'NR % 4 == k' "$r/runs.txt" | while IFS='|' read -r m args; do
    if [ "$(left)" -lt 90 ]; then printf '%s\t%s\tskipped (deadline)\n' "$m" "$args"; continue; fi
    env $(knobs "$m") timeout 45 "$bin" run --backend cuda $args > "$r/verify-$1.log" 2>&1 < /dev/null
    rc=$?
    printf '%s\t%s\trc %s\t%s\n' "$m" "$args" "$rc" "$(grep -v '^$' "$r/verify-$1.log" | tail -n 1 | cut -c1-140)"
    [ $rc -ne 0 ] && cat "$r/verify-$1.log" >> "$r/verify-fail.log"
  done > "$r/verify-$1.tsv"
}
for k in 0 1 2 3; do verify_stream $k & done
timeout 28 stdbuf -oL bin/test_sm90_attention 2026 "192x128 s4 affine" 2>&1 | stamp_lines > "$r/dt-affine.txt"
rc=${PIPESTATUS[0]}
echo "   192x128 s4 affine: rc $rc; $(grep -c ' OK ' "$r/dt-affine.txt") OK ($(grep -c ' OK .*scaled' "$r/dt-affine.txt") scaled), $(grep -c 'FAIL' "$r/dt-affine.txt") FAIL; $(tail -n 1 "$r/dt-affine.txt" | cut -c1-150)"
timeout 5 stdbuf -oL bin/test_sm90_attention 2026 "Fr Ep" 2>&1 | stamp_lines > "$r/dt-sample.txt"
echo "   sample: rc ${PIPESTATUS[0]}; $(grep -c ' OK ' "$r/dt-sample.txt") OK, $(grep -c 'FAIL' "$r/dt-sample.txt") FAIL"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait
cat "$r"/verify-[0123].tsv > "$r/verify.tsv"
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -6

: > "$r/solder.jsonl"
bench_one() {  # $1 setting, $2 case id, $3 round
  local m=$1 id=$2 line
  line=$(env $(knobs "$m") timeout 15 "$bin" bench $(args_of "$id") --json 2>>"$r/solder.err" < /dev/null | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$m\", \"round\": $3, \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$m] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: 1 (the default first) or 2 (the default last, alibi S 1k left out), $2: seconds to leave
  grep -v "^alibi-d64-s1024 " "$r/timed.txt" | { [ "$1" = 1 ] && cat "$r/timed.txt" || cat; } | while read -r id modes; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id (round $1)"; break; }
    order=$modes
    [ "$1" = 2 ] && order="$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')"
    for m in $order; do bench_one "$m" "$id" "$1"; done
  done
}
flex() {  # $1: case regex, $2: seconds to leave
  [ "$(left)" -lt "$2" ] && { echo "   deadline: no Flex on $1"; return; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 8 )) python3 bench/peers.py --no-ceilings --out "$r/peers.jsonl" \
    --suite attention --cases "$1" --peers flex --time-limit 60 >> "$r/peers.log" 2>&1 < /dev/null
  echo "   Flex $1 rc $? ($(left) s left)"
}
echo "== 3. Solder, round 1 ($(left) s left)"
round 1 30
echo "== 4. FlexAttention max-autotune ($(left) s left)"
flex '^(alibi-d64-s4096|prefix_lm-d64-s4096)$' 45
echo "== 5. Solder, round 2 ($(left) s left)"
round 2 12
if [ "$(left)" -gt 22 ] && command -v ncu > /dev/null; then
  echo "== ncu, alibi S 4k, the scaled kernel ($(left) s left)"
  timeout $(( $(left) - 5 )) ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis "$bin" bench $(args_of alibi-d64-s4096) --replays 1 > "$r/ncu-alibi-s4096.txt" 2>&1
  echo "   ncu rc $?"
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued|Eligible Warps|Executed Ipc" "$r/ncu-alibi-s4096.txt" | head -14
fi

flex '^alibi-d64-s16384$' 30

python3 - "$r" <<'PY' | tee "$r/summary.md"
import json, sys, statistics, collections
r = sys.argv[1]
t = collections.defaultdict(list)
for l in open(f"{r}/solder.jsonl"):
    d = json.loads(l)
    if d["result"]: t[(d["case"], d["mode"])].append(d["result"]["median_us"])
flex = {}
try:
    for l in open(f"{r}/peers.jsonl"):
        d = json.loads(l)
        if d.get("peer") == "flex" and d.get("median_us"): flex[d["case"]] = d["median_us"]
except FileNotFoundError: pass
print("| cell | setting | rounds (µs) | mean | / def | Flex MA | / Flex |")
print("|---|---|---|---|---|---|---|")
for (case, mode), v in t.items():
    m = statistics.mean(v); d = t.get((case, "def")); f = flex.get(case)
    print(f"| {case} | {mode} | {', '.join('%.1f' % x for x in v)} | {m:.1f} | {m / statistics.mean(d):.3f} | {f or '—'} | {('%.3f' % (m / f)) if f else '—'} |" if d else f"| {case} | {mode} | {v} | {m:.1f} | — | {f} | — |")
PY
tar czf "$O/r.tgz" -C "$O" r
echo "== done ($(left) s left)"
