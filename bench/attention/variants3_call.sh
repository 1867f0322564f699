#!/usr/bin/env bash
# One device call for issue 17's FlexAttention-target variants (branch attn-variants2, thirteenth
# session): the knob sweep of free consumers (SOLDER_ATTN_FREE), the staged epilogue (SOLDER_ATTN_EPI) and
# two consumers on long rows (SOLDER_ATTN_CONSUMERS=2) at the missed cells, each setting only where
# `solder emit` showed it yields a Config of its own. Run on the device from a mini repository root staged
# by bench/attention/variants3_stage.sh (build/solder, bin/test_sm90_attention.gz, examples/, bench/,
# COMMIT, flex_max_autotune.jsonl) with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=100 bash bench/attention/variants3_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test: the new "Vr" cases (the sweep's Configs, bit for bit against the same
#      Config with turns / per-pair stores, and the float64 reference; $DT_FILTER: another label filter),
#      then a short sample ("Fr Ep");
#   2. beside it, `solder run --backend cuda` (float64 reference) of every timed non-default setting at
#      its cell's size and of the knobs at the examples' small sizes, four at a time;
#   3. `solder bench` of every (cell, setting), round 1 in the list's order (the default first in each
#      cell), then round 2 (the default last) in the same order until the deadline;
#   4. FlexAttention in default mode on sliding_window S 16k and prefix_lm S 1k if time is left (a
#      same-call sanity peer; the ratios use Flex max-autotune from integrator-2026-11-27-s12/call3).
# Everything lands in $OUT/r (tarred to $OUT/r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; r=$O/r; mkdir -p "$r"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-100} - ($(date +%s) - start) )); }
stamp_lines() { while IFS= read -r l; do printf '%6d %s\n' "$(( $(date +%s) - start ))" "$l"; done; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$r/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$r/device.txt"
bin=build/solder
[ -f bin/test_sm90_attention.gz ] && gunzip -f bin/test_sm90_attention.gz

# The settings: a name and its knobs ("-": none, the emitter's default).
knobs() {
  case $1 in
    def) echo "" ;;
    F) echo "SOLDER_ATTN_FREE=1" ;;
    E) echo "SOLDER_ATTN_EPI=1" ;;
    FE) echo "SOLDER_ATTN_FREE=1 SOLDER_ATTN_EPI=1" ;;
    C2FE) echo "SOLDER_ATTN_CONSUMERS=2 SOLDER_ATTN_FREE=1 SOLDER_ATTN_EPI=1" ;;
  esac
}
# (cell, settings) in priority order: the closest misses first
cat > "$r/timed.txt" <<'EOF'
sliding_window-d64-s16384 def F E FE
prefix_lm-d64-s1024 def F E FE
alibi-d64-s4096 def E C2FE
sliding_window-d64-s1024 def FE
sliding_window-d64-s4096 def FE
prefix_lm-d64-s4096 def E C2FE
diff_attn-d64-s16384 def E
alibi-d64-s16384 def E
alibi-d64-s1024 def FE
evoformer-b1-d64 def F
EOF
python3 - "$r/timed.txt" > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open(sys.argv[1]):
    c = cases[line.split()[0]]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
args_of() { grep "^$1 " "$r/cases.txt" | cut -d' ' -f2-; }
# verification: every timed setting but the default at its cell's size, then the knobs at the small sizes
{
  while read -r id modes; do
    for m in $modes; do [ "$m" = def ] || echo "$m|$(args_of "$id")"; done
  done < "$r/timed.txt"
  printf '%s\n' "FE|examples/sliding_window.sol --small" "FE|examples/prefix_lm.sol --small" "FE|examples/alibi.sol --small" \
    "E|examples/alibi.sol --small" "F|examples/evoformer.sol --small" "E|examples/diff_attn.sol --small"
} > "$r/runs.txt"
{
  while read -r id modes; do
    for m in $modes; do echo "$(knobs "$m") $bin bench --compile-only $(args_of "$id")"; done
  done < "$r/timed.txt"
  while IFS='|' read -r m args; do echo "$(knobs "$m") $bin bench --compile-only $args"; done < "$r/runs.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. device test (Vr, then a sample), and 2. solder run beside it ($(left) s left)"
verify_stream() {  # $1: stream index (0..3): every fourth line of runs.txt
  awk -v k="$1" 'NR % 4 == k' "$r/runs.txt" | while IFS='|' read -r m args; do
    if [ "$(left)" -lt 60 ]; then printf '%s\t%s\tskipped (deadline)\n' "$m" "$args"; continue; fi
    env $(knobs "$m") timeout 40 "$bin" run --backend cuda $args > "$r/verify-$1.log" 2>&1
    rc=$?
    printf '%s\t%s\trc %s\t%s\n' "$m" "$args" "$rc" "$(grep -v '^$' "$r/verify-$1.log" | tail -n 1 | cut -c1-140)"
    [ $rc -ne 0 ] && cat "$r/verify-$1.log" >> "$r/verify-fail.log"
  done > "$r/verify-$1.tsv"
}
for k in 0 1 2 3; do verify_stream $k & done
timeout 28 stdbuf -oL bin/test_sm90_attention 2026 "${DT_FILTER:-Vr}" 2>&1 | stamp_lines > "$r/dt-vr.txt"
rc=${PIPESTATUS[0]}
echo "   ${DT_FILTER:-Vr}: rc $rc; $(grep -c ' OK ' "$r/dt-vr.txt") OK, $(grep -c 'FAIL' "$r/dt-vr.txt") FAIL; $(tail -n 1 "$r/dt-vr.txt" | cut -c1-150)"
timeout 4 stdbuf -oL bin/test_sm90_attention 2026 "Fr Ep" 2>&1 | stamp_lines > "$r/dt-sample.txt"
echo "   sample: rc ${PIPESTATUS[0]}; $(grep -c ' OK ' "$r/dt-sample.txt") OK, $(grep -c 'FAIL' "$r/dt-sample.txt") FAIL"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait
cat "$r"/verify-[0123].tsv > "$r/verify.tsv"
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -6

: > "$r/solder.jsonl"
bench_one() {  # $1 setting, $2 case id
  local m=$1 id=$2 line
  line=$(env $(knobs "$m") timeout 15 "$bin" bench $(args_of "$id") --json 2>>"$r/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$m\", \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$m] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: 1 (the default first) or 2 (the default last), $2: seconds to leave
  while read -r id modes; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id (round $1)"; break; }
    order=$modes
    [ "$1" = 2 ] && order="$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')"
    for m in $order; do bench_one "$m" "$id"; done
  done < "$r/timed.txt"
}
echo "== 3. Solder, round 1 ($(left) s left)"
round 1 14
echo "== 3b. round 2 ($(left) s left)"
round 2 ${ROUND2_LEAVE:-6}

if [ "$(left)" -gt 45 ]; then
  echo "== 4. FlexAttention, default mode ($(left) s left)"
  timeout "$(( $(left) - 5 ))" python3 bench/peers.py --suite attention --cases '^(sliding_window-d64-s16384|prefix_lm-d64-s1024)$' \
    --peers flex --compile-mode default --out "$r/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings > "$r/peers.log" 2>&1
  grep -E "µs" "$r/peers.log" | head -3
fi

python3 bench/attention/variants3_table.py "$r/solder.jsonl" flex_max_autotune.jsonl "$r/peers.jsonl" > "$r/summary.md" 2>&1
tar czf "$O/r.tgz" -C "$O" r
echo "== done in $(( $(date +%s) - start )) s"
cat "$r/summary.md"
