#!/usr/bin/env bash
# One device call for the causal cells against cuDNN (issue 17, branch causal-long: the work tile's setup
# posted with its entry, SOLDER_ATTN_POSTED; persistent two-consumer blocks and the staged epilogue at S 4k
# and 16k), run on the device from a mini repository root staged by bench/attention/epi_stage.sh
# (build/solder, bin/test_sm90_attention.gz, examples/, bench/, COMMIT) with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=100 bash bench/attention/long_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test under timeouts, each line stamped with its second: the PostedWork cases
#      ("Pw": bit for bit against the same or a plainer Config, and the float64 reference), the staged
#      epilogue on the one-block-per-tile kernels ("Ep long"), a short sample ("d128 s2 P Ep");
#   2. beside it, `solder run --backend cuda` (against the float64 reference) with SOLDER_ATTN_POSTED=1:
#      causal small, paper, ragged S 1000; with the persistent hd128 knobs: causal hd128 S 1k, small;
#   3. the modes of bench/attention/long.cells (CASE MODE ENV...), round 1 in the file's order, then
#   4. cuDNN SDPA on the six causal cells (bench/peers.py, CUDA graph replays, median), then round 2
#      (each cell's modes in reverse order), as far as the deadline allows;
#   5. one ncu of causal hd64 S 4k (the default kernel), if time is left.
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

# the cells: "CASE MODE ENV..." -> "ENV...|CASE|MODE|ARGS"
python3 - > "$r/cells.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open("bench/attention/long.cells"):
    words = line.split()
    if not words or words[0].startswith("#"):
        continue
    c = cases[words[0]]
    args = f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items())
    print(" ".join(words[2:]), c.id, words[1], args, sep="|")
PY
runs="SOLDER_ATTN_POSTED=1|examples/causal.sol --small
SOLDER_ATTN_POSTED=1|examples/causal.sol
SOLDER_ATTN_POSTED=1|examples/causal.sol --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_FREE=1 SOLDER_ATTN_POSTED=1|examples/causal.sol --dim D=128 --dim S=1024
SOLDER_ATTN_SHORT=all SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_FREE=1 SOLDER_ATTN_POSTED=1|examples/causal.sol --small --dim D=128"
echo "$runs" > "$r/runs.txt"
{
  awk -F'|' '{ print $1 " '"$bin"' bench --compile-only " $4 }' "$r/cells.txt"
  awk -F'|' '{ print $1 " '"$bin"' bench --compile-only " $2 }' "$r/runs.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. device test, and 2. solder run beside it ($(left) s left)"
(
  : > "$r/verify.tsv"
  while IFS='|' read -r envs args; do
    [ "$(left)" -lt 60 ] && { printf '%s %s\tskipped (deadline)\n' "$envs" "$args" >> "$r/verify.tsv"; continue; }
    env $envs timeout 25 "$bin" run --backend cuda $args > "$r/verify-one.log" 2>&1
    rc=$?
    printf '%s %s\trc %s\t%s\n' "$envs" "$args" "$rc" "$(grep -v '^$' "$r/verify-one.log" | tail -n 1 | cut -c1-140)" >> "$r/verify.tsv"
    [ $rc -ne 0 ] && cat "$r/verify-one.log" >> "$r/verify-fail.log"
  done < "$r/runs.txt"
) &
verify_pid=$!
for t in "Pw:26" "Ep long:7" "d128 s2 P Ep:2"; do
  filter=${t%:*}; secs=${t##*:}; f=dt-$(echo "$filter" | tr ' ' '_').txt
  timeout "$secs" stdbuf -oL bin/test_sm90_attention 2026 "$filter" 2>&1 | stamp_lines > "$r/$f"
  rc=${PIPESTATUS[0]}
  echo "   \"$filter\": rc $rc; $(grep -c ' OK ' "$r/$f") OK, $(grep -c 'FAIL' "$r/$f") FAIL; $(tail -n 1 "$r/$f" | cut -c1-150)"
done
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"
wait "$verify_pid"
echo "== 2. verified through the CUDA backend: $(grep -c $'\trc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt") ($(left) s left)"
grep -v $'\trc 0\t' "$r/verify.tsv" | head -4

: > "$r/solder.jsonl"
bench_one() {  # $1 envs, $2 case id, $3 mode, $4 args
  local line
  line=$(env $1 timeout 15 "$bin" bench $4 --replays 30 --json 2>>"$r/solder.err" | tail -n 1)
  echo "{\"case\": \"$2\", \"mode\": \"$3\", \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$3] $2: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: the cells file (tsv), $2: seconds to leave for what follows
  while IFS='|' read -r envs id mode args; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id $mode"; break; }
    bench_one "$envs" "$id" "$mode" "$args"
  done < "$1"
}
echo "== 3. round 1 ($(left) s left)"
round "$r/cells.txt" 30

echo "== 4. cuDNN on the causal cells ($(left) s left)"
if [ "$(left)" -gt 14 ]; then
  timeout "$(( $(left) - 4 ))" python3 bench/peers.py --suite attention --cases '^causal-' --peers sdpa_cudnn \
    --out "$r/peers.jsonl" --time-limit "$(( $(left) - 8 ))" --no-ceilings > "$r/peers.log" 2>&1
  grep -E "µs" "$r/peers.log" | head -8
fi
echo "== 3b. round 2 ($(left) s left)"
# the cells in the same order, each cell's modes reversed
python3 -c 'import sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
cells = []
for l in lines:
    c = l.split("|")[1]
    if not cells or cells[-1][0] != c: cells.append((c, []))
    cells[-1][1].append(l)
sys.stdout.write("".join("".join(reversed(ls)) for _, ls in cells))' "$r/cells.txt" > "$r/cells2.txt"
round "$r/cells2.txt" 5

echo "== 5. ncu of causal hd64 S 4k, the default kernel ($(left) s left)"
if [ "$(left)" -gt 18 ]; then
  args=$(awk -F'|' '$2 == "causal-d64-s4096" && $3 == "old" { print $4; exit }' "$r/cells.txt")
  timeout "$(( $(left) - 3 ))" ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    "$bin" bench $args --replays 1 > "$r/ncu-causal-s4k.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|No Eligible|Warp Cycles Per Issued|Memory Throughput" "$r/ncu-causal-s4k.txt" | head -8
fi

python3 bench/attention/long_table.py "$r/solder.jsonl" "$r/peers.jsonl" > "$r/summary.md" 2>&1
tar czf "$O/r.tgz" -C "$O" r
echo "== done in $(( $(date +%s) - start )) s"
cat "$r/summary.md"
