#!/usr/bin/env bash
# One device call for the non-causal cuDNN cells (issue 17, branch attn-wide): the staged epilogue on one
# block per work tile with the consumer's own Q rows as its buffer (Config::EpilogueInQ), the K/V depth
# of those kernels ($SOLDER_ATTN_STAGES) and hd128 on persistent blocks with two Q buffers
# ($SOLDER_ATTN_SHORT=all), run on the device from a mini repository root staged by
# bench/attention/epi_stage.sh (build/solder, bin/test_sm90_attention.gz, examples/, bench/, COMMIT) with
# the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=100 bash bench/attention/wide_call.sh
#
#   0. every solder kernel of 3 compiled in parallel (NVRTC, one per core) while 1 and 2 run;
#   1. the skeleton's device test: the cases of the epilogue in the Q rows ("EpQ", bit for bit against the
#      same Config with the per-pair stores, and the float64 reference) and hd128's persistent two-Q-buffer
#      Config with the staged epilogue ("P Q2 Ep"), then a short sample of the rest ("d128 128x128 s2"),
#      each line stamped with its second, under timeouts; beside it
#   2. `solder run --backend cuda` of each new schedule, in parallel (small, paper, hd128, ragged S 1000);
#   3. the modes of cells.txt (below), interleaved: round 1 (each cell's modes in order), then
#   4. cuDNN SDPA on the cells (bench/peers.py, CUDA graph replays, median), then round 2 (reversed);
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

# The modes (MODE ENV...): old = the per-pair stores (the default before this branch), new = the staged
# epilogue (in the Q rows on one block per work tile), s3 = new on 3 K/V stages (hd128: the stage the
# dedicated buffer would have cost), s6 = new on 6 (gqa hd64 S 4k's 3 consumers), pers = hd128 on
# persistent blocks with two Q buffers and the buffer of its own, persf = pers with free consumers.
cat > "$r/modes.txt" <<'EOF'
old SOLDER_ATTN_EPI=0
new SOLDER_ATTN_EPI=1
s3 SOLDER_ATTN_EPI=1 SOLDER_ATTN_STAGES=3
s6 SOLDER_ATTN_EPI=1 SOLDER_ATTN_STAGES=6
pers SOLDER_ATTN_EPI=1 SOLDER_ATTN_SHORT=all
persf SOLDER_ATTN_EPI=1 SOLDER_ATTN_SHORT=all SOLDER_ATTN_FREE=1
EOF
# CELL MODES (most important first)
cat > "$r/cells.txt" <<'EOF'
vanilla-d128-s1024 new old s3 pers persf
vanilla-d128-s4096 new old s3
vanilla-d128-s16384 new old s3
gqa-d64-s4096 new old s6
EOF
python3 - "$r/cells.txt" > "$r/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for line in open(sys.argv[1]):
    c = cases[line.split()[0]]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
env_of() { grep "^$1 " "$r/modes.txt" | cut -d' ' -f2-; }
args_of() { grep "^$1 " "$r/cases.txt" | cut -d' ' -f2-; }

# 2's runs: ENV | ARGS
cat > "$r/runs.txt" <<'EOF'
SOLDER_ATTN_EPI=1|examples/vanilla.sol --small
SOLDER_ATTN_EPI=1|examples/gqa.sol --small
SOLDER_ATTN_EPI=1|examples/vanilla.sol --dim D=128 --dim S=1024
SOLDER_ATTN_EPI=1|examples/vanilla.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_EPI=1 SOLDER_ATTN_STAGES=3|examples/vanilla.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_EPI=1 SOLDER_ATTN_SHORT=all|examples/vanilla.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_EPI=1 SOLDER_ATTN_SHORT=all SOLDER_ATTN_FREE=1|examples/vanilla.sol --dim D=128 --dim B=2 --dim H=3 --dim S=1000
SOLDER_ATTN_EPI=1|examples/gqa.sol --dim B=2 --dim S=2000
SOLDER_ATTN_EPI=1 SOLDER_ATTN_STAGES=6|examples/gqa.sol --dim B=2 --dim S=2000
SOLDER_ATTN_EPI=1|examples/vanilla.sol
SOLDER_ATTN_EPI=1|examples/gqa.sol
EOF
while read -r id modes; do
  for m in $modes; do echo "$(env_of $m) $bin bench --compile-only $(args_of $id)"; done
done < "$r/cells.txt" > "$r/compile-cmds.txt"  # (2's runs compile their own)
xargs -d '\n' -P "$(nproc)" -n 1 sh -c < "$r/compile-cmds.txt" > "$r/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. device test, and 2. solder run beside it ($(left) s left)"
mkdir -p "$r/verify"
n=0
while IFS='|' read -r envs args; do
  n=$((n + 1))
  echo "env $envs timeout 40 $bin run --backend cuda $args > $r/verify/$n.log 2>&1; echo \"$n rc \$?\" > $r/verify/$n.rc"
done < "$r/runs.txt" > "$r/verify-cmds.txt"
xargs -d '\n' -P 4 -n 1 sh -c < "$r/verify-cmds.txt" > /dev/null 2>&1 &
verify_pid=$!
dtest() {  # $1 file tag, $2 seconds, $3 filter
  timeout "$2" stdbuf -oL bin/test_sm90_attention 2026 "$3" 2>&1 | stamp_lines > "$r/dt-$1.txt"
  local rc=${PIPESTATUS[0]}
  echo "   \"$3\": rc $rc; $(grep -c ' OK ' "$r/dt-$1.txt") OK, $(grep -c 'FAIL' "$r/dt-$1.txt") FAIL; $(tail -n 1 "$r/dt-$1.txt" | cut -c1-150)"
}
dtest epq 20 EpQ
dtest pq2 10 "d128 s2 P Q2 Ep"
dtest sample 4 "d128 128x128 s2"
grep -h "FAIL" "$r"/dt-*.txt | head -5
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$r/compile.log")"

echo "== 3. Solder's modes, interleaved, round 1 ($(left) s left)"
: > "$r/solder.jsonl"
bench_one() {  # $1 mode, $2 case id
  local line
  line=$(env $(env_of $1) timeout 15 "$bin" bench $(args_of $2) --json 2>>"$r/solder.err" | tail -n 1)
  echo "{\"case\": \"$2\", \"mode\": \"$1\", \"result\": ${line:-null}}" >> "$r/solder.jsonl"
  echo "   [$1] $2: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
round() {  # $1: the round (2: each cell's modes reversed), $2: seconds to leave for what follows
  while read -r id modes; do
    [ "$(left)" -lt "$2" ] && { echo "   deadline: stopped before $id (round $1)"; break; }
    [ "$1" = 2 ] && modes=$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')
    for m in $modes; do bench_one $m "$id"; done
  done < "$r/cells.txt"
}
round 1 30

echo "== 4. cuDNN on the cells ($(left) s left)"
if [ "$(left)" -gt 18 ]; then
  timeout "$(( $(left) - 6 ))" python3 bench/peers.py --suite attention \
    --cases '^(vanilla-d128-s(1024|4096|16384)|gqa-d64-s4096)$' --peers sdpa_cudnn \
    --out "$r/peers.jsonl" --time-limit "$(( $(left) - 10 ))" --no-ceilings > "$r/peers.log" 2>&1
  grep -E "µs" "$r/peers.log" | head -5
fi
wait "$verify_pid"
n=0
while IFS='|' read -r envs args; do
  n=$((n + 1))
  printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$envs" "$args" "$(cat $r/verify/$n.rc 2>/dev/null || echo "$n no result")" \
    "$(grep -v '^$' $r/verify/$n.log 2>/dev/null | tail -n 1 | cut -c1-140)"
done < "$r/runs.txt" > "$r/verify.tsv"
echo "== 2. verified through the CUDA backend: $(grep -c $'\t[0-9]* rc 0\t' "$r/verify.tsv") of $(wc -l < "$r/runs.txt")"
grep -v $'\t[0-9]* rc 0\t' "$r/verify.tsv" | head -4
echo "== 3b. round 2 ($(left) s left)"
round 2 5

python3 bench/attention/modes_table.py "$r/solder.jsonl" "$r/peers.jsonl" --modes new,old,s3,s6,pers,persf --peer sdpa_cudnn > "$r/summary.md" 2>&1
cp "$r/summary.md" "$O/summary.md"
tar czf "$O/r.tgz" -C "$O" r
echo "== done in $(( $(date +%s) - start )) s"
cut -f2-5 "$r/verify.tsv" | cut -c1-200
cat "$r/summary.md"
