#!/usr/bin/env bash
# One device call for the hd128 cells against cuDNN (issue 17, branch hd128: the staged epilogue in the
# consumer's own Q rows on persistent blocks, Config::QRowsEpilogue, SOLDER_ATTN_EPI_Q=1; vanilla hd128 on
# causal hd128 S 1k's persistent Config), run on the device from a mini repository root staged by
# bench/attention/epi_stage.sh (build/solder, bin/test_sm90_attention.gz, examples/, bench/, COMMIT) with
# the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=140 bash bench/attention/hd128_call.sh
#
#   0. every solder kernel of the call compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test under timeouts, each line stamped with its second: the QRowsEpilogue
#      cases ("Qr": bit for bit against the same schedule with the dedicated buffer, and the float64
#      reference, on 0 / 1 / 3 / 7 blocks), a short sample of the rest (the producer's K/V loop moved into
#      a lambda: vanilla hd128's default "EpQ", hd64's staggered "St2 many");
#   2. beside it, `solder run --backend cuda` (against the float64 reference) of the new Configs: vanilla
#      and causal hd128 small and ragged S 1000, causal hd128 S 4096 on one and two Q buffers, vanilla
#      hd128 S 1k at its suite size;
#   3. the modes of bench/attention/hd128.cells (CASE MODE ENV...), round 1 in the file's order, then
#   4. cuDNN SDPA on the six hd128 cells (bench/peers.py, CUDA graph replays, median), then round 2 (each
#      cell's modes in reverse order), as far as the deadline allows;
#   5. one ncu of vanilla hd128 S 1k's default kernel (SpeedOfLight, WarpStateStats, SchedulerStats,
#      MemoryWorkloadAnalysis), if time is left.
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

# the cells: "CASE MODE ENV..." -> "ENV...|CASE|MODE|ARGS"
python3 - > "$r/cells.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open("bench/attention/hd128.cells"):
    words = line.split()
    if not words or words[0].startswith("#"):
        continue
    c = cases[words[0]]
    args = f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items())
    print(" ".join(words[2:]), c.id, words[1], args, sep="|")
PY
qr_v="SOLDER_ATTN_SHORT=all SOLDER_ATTN_QBUFFERS=1 SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_FREE=1 SOLDER_ATTN_EPI=1 SOLDER_ATTN_POSTED=1 SOLDER_ATTN_EPI_Q=1"
runs="$qr_v|examples/vanilla.sol --small --dim D=128
$qr_v|examples/vanilla.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_EPI_Q=1|examples/causal.sol --small --dim D=128
SOLDER_ATTN_EPI_Q=1|examples/causal.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_QBUFFERS=1 SOLDER_ATTN_EPI_Q=1|examples/causal.sol --dim D=128 --dim B=1 --dim H=2 --dim S=4096
SOLDER_ATTN_EPI_Q=1|examples/causal.sol --dim D=128 --dim B=1 --dim H=3 --dim S=4000
$qr_v|examples/vanilla.sol --dim D=128 --dim S=1024"
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
    [ "$(left)" -lt 70 ] && { printf '%s %s\tskipped (deadline)\n' "$envs" "$args" >> "$r/verify.tsv"; continue; }
    env $envs timeout 30 "$bin" run --backend cuda $args > "$r/verify-one.log" 2>&1
    rc=$?
    printf '%s %s\trc %s\t%s\n' "$envs" "$args" "$rc" "$(grep -v '^$' "$r/verify-one.log" | tail -n 1 | cut -c1-140)" >> "$r/verify.tsv"
    [ $rc -ne 0 ] && cat "$r/verify-one.log" >> "$r/verify-fail.log"
  done < "$r/runs.txt"
) &
verify_pid=$!
for t in "Qr:34" "d128 s2 EpQ:3" "St2 many:3"; do
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
round "$r/cells.txt" 45

echo "== 4. cuDNN on the hd128 cells ($(left) s left)"
if [ "$(left)" -gt 14 ]; then
  timeout "$(( $(left) - 4 ))" python3 bench/peers.py --suite attention --cases '^(vanilla|causal)-d128-s(1024|4096|16384)$' --peers sdpa_cudnn \
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
round "$r/cells2.txt" 22

echo "== 5. ncu of vanilla hd128 S 1k, the default kernel ($(left) s left)"
if [ "$(left)" -gt 15 ]; then
  args=$(awk -F'|' '$2 == "vanilla-d128-s1024" && $3 == "old" { print $4; exit }' "$r/cells.txt")
  timeout "$(( $(left) - 3 ))" ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis "$bin" bench $args --replays 1 > "$r/ncu-vanilla-d128-s1k.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|No Eligible|Warp Cycles Per Issued|Memory Throughput|Issued Warp|Eligible Warps" "$r/ncu-vanilla-d128-s1k.txt" | head -10
fi

python3 bench/attention/long_table.py "$r/solder.jsonl" "$r/peers.jsonl" > "$r/summary.md" 2>&1
tar czf "$O/r.tgz" -C "$O" r
cp "$r/summary.md" "$O/summary.md"
echo "== done in $(( $(date +%s) - start )) s"
cat "$r/summary.md"
