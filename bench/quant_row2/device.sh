#!/usr/bin/env bash
# One device call for issue 15, twelfth session, branch quant-row2: the row kernel's division by the
# row's scale through one reciprocal per row (device/solder/reduce/row_divide.h) and two row blocks per
# SM (bench/NOTES.md, "(twelfth session): the row division by one reciprocal per row"). Most important
# first, each part written to $OUT as it finishes:
#   0. tests/gpu/row_divide: divide_by_row against __fdiv_rn for every f32 bit pattern, 25 divisors;
#   1. `solder run --backend cuda` (float64 reference) of the row kernels alone, quant_gemm Q1/Q2/Q5/
#      Q7/Q8/Q9, ragged and small, rmsnorm_gemm L1, softmax (every kernel whose code changes: the
#      divisions by a row value), also at SOLDER_ROW_BLOCKS_PER_SM=2, in the background on the CPU;
#   2. `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm L1-L2 whole (the default);
#   3. the row kernels alone, interleaved per row: new (reciprocal) / old (SOLDER_ROW_DIVIDE=ieee) at one
#      row block per block (the default), new at SOLDER_ROW_BLOCKS_PER_SM=2 (Q8: the new default again);
#   4. whole programs A/B: SOLDER_ROW_BLOCKS_PER_SM=2 at Q8, Q2, Q5, L1; the old division at Q8;
#   5. the peers in the same call: torch.compile default mode for Q1-Q10 and L1-L2 (Inductor's compiles
#      warm in the background from the start, untimed);
#   6. ncu of Q8's row kernel (new, default grid) if time is left.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, row_divide, tree/device, cache/),
# inside the device's tree (examples/ and bench/ are read from the tree two levels up):
#   cd .devcarry/quant-row2 && DEADLINE=105 bash device.sh
# bench/quant_row2/stage.sh builds the carry folder on the build machine.
set -uo pipefail
R=${TREE:-../..}
ROWS=$R/bench/programs/quant_rows.sol
RMS=$R/bench/programs/rmsnorm_rows.sol
Q="--dim M=4096"
QG=$R/examples/quant_gemm.sol
# The row kernels alone: label | program and dims (Q8's row is Q5's: K 2048; Q9's is Q2's: K 1536).
ROW_CASES="Q8|$ROWS $Q --dim K=2048
Q2|$ROWS $Q --dim K=1536
Q1|$ROWS $Q --dim K=2560
Q3|$ROWS $Q --dim K=8192
Q4|$ROWS $Q --dim K=3584
L1|$RMS"
# The row kernels' variants: label | env.
ROW_VARIANTS="new0|SOLDER_ROW_BLOCKS_PER_SM=0
old0|SOLDER_ROW_BLOCKS_PER_SM=0 SOLDER_ROW_DIVIDE=ieee
new2|SOLDER_ROW_BLOCKS_PER_SM=2"
# label | env | `solder run --backend cuda` arguments.
VERIFY="rows.Q8||$ROWS $Q --dim K=2048
rows.Q1||$ROWS $Q --dim K=2560
rows.Q2||$ROWS $Q --dim K=1536
rows.Q3||$ROWS $Q --dim K=8192
rows.Q4||$ROWS $Q --dim K=3584
rows.ragged||$ROWS --dim M=4093 --dim K=2056
rows.ragged_long||$ROWS --dim M=1021 --dim K=7176
rows.small||$ROWS --small
rows.Q8.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|$ROWS $Q --dim K=2048
rows.Q2.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|$ROWS $Q --dim K=1536
rows.ragged.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|$ROWS --dim M=4093 --dim K=2056
rms_rows.L1||$RMS
quant_gemm.Q8||$QG $Q --dim N=768 --dim K=2048
quant_gemm.Q2||$QG $Q --dim N=2560 --dim K=1536
quant_gemm.Q1||$QG $Q --dim N=1536 --dim K=2560
quant_gemm.Q7||$QG $Q --dim N=2048 --dim K=768
quant_gemm.Q9||$QG $Q --dim N=4096 --dim K=1536
quant_gemm.ragged||$QG --dim M=1003 --dim N=264 --dim K=2048
quant_gemm.small||$QG --small
quant_gemm.Q8.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|$QG $Q --dim N=768 --dim K=2048
rmsnorm_gemm.L1||$R/examples/rmsnorm_gemm.sol
softmax.default||$R/examples/softmax.sol
softmax.ragged||$R/examples/softmax.sol --dim T=1000 --dim N=3000
softmax.small||$R/examples/softmax.sol --small"
# Whole programs A/B: label | env | suite command filter (N and K of the case).
WHOLE_AB="Q8.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|N=768 --dim K=2048
Q8.old|SOLDER_ROW_DIVIDE=ieee|N=768 --dim K=2048
Q2.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|N=2560 --dim K=1536
Q5.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|N=7168 --dim K=2048
L1.per_sm2|SOLDER_ROW_BLOCKS_PER_SM=2|HID=4096 --dim N=6144"
suite_commands() {  # SOLDER OUTDIR
  python3 "$R/bench/suites.py" --suite reductions --cases '^(quant_gemm|rmsnorm_gemm)-' --solder-commands --solder "$1" --timeout 25 \
    --out "$2/solder.jsonl" | sed "s| examples/| $R/examples/|"
}
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$ROW_CASES" | while IFS='|' read -r label args; do
    echo "$ROW_VARIANTS" | while IFS='|' read -r v env; do echo "env $env timeout 100 $1 bench $args --compile-only"; done; done
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
  suite_commands "$1" /tmp | sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /timeout 100 /'
  echo "$WHOLE_AB" | while IFS='|' read -r label env filter; do
    suite_commands "$1" /tmp | grep -F -- "$filter" | sed -e 's/ --json >>.*$/ --compile-only/' -e "s/^timeout 25 /env $env timeout 100 /"; done
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

# Everything is written under /tmp/qrow2; $OUT gets qrow2.tgz (all of it), log.txt and summary.txt.
O=${OUT:-/tmp/out}; out=/tmp/qrow2; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); left() { echo $(( ${DEADLINE:-100} - ($(date +%s) - start) )); }
pack() { tar czf "$O/qrow2.tgz" -C /tmp qrow2 2>/dev/null; }
[ -f payload.tgz ] && tar xzf payload.tgz  # stage.sh: solder, libgomp, row_divide, tree/, cache/
chmod +x solder row_divide 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m)" | tee -a "$out/device.txt"

# Inductor's compiles (default mode, untimed: 2 replays), the cells over 1.0x first.
CELLS_FIRST='^(quant_gemm-Q(8|5|6|10|2|1)|rmsnorm_gemm-L1)$'
CELLS_REST='^(quant_gemm-Q(3|4|7|9)|rmsnorm_gemm-L2)$'
( for c in "$CELLS_FIRST" "$CELLS_REST"; do
    PYTHONUNBUFFERED=1 timeout 80 python3 "$R/bench/peers.py" --suite reductions --cases "$c" --peers compile \
      --compile-mode default --reps 2 --warmup 1 --no-ceilings --out /tmp/qrow2-peers-warm.jsonl >> "$out/peers-warm.txt" 2>&1 &
    echo $! > /tmp/qrow2-bg; wait
  done ) &
warm_pid=$!
bg_stop() {  # $1: seconds to wait for the background warm-up before stopping it
  local t0; t0=$(date +%s)
  while kill -0 "$warm_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$1" ]; do sleep 1; done
  kill "$warm_pid" 2>/dev/null; [ -f /tmp/qrow2-bg ] && kill "$(cat /tmp/qrow2-bg)" 2>/dev/null
  echo "   warm-up: $(grep -c '"status": "ok"' /tmp/qrow2-peers-warm.jsonl 2>/dev/null) peers compiled"
}

echo "== 0. row_divide device test: every f32 numerator ($(left) s left)"
if [ -x ./row_divide ]; then timeout 20 ./row_divide > "$out/row_divide.txt" 2>&1; echo "   rc $?: $(tail -1 "$out/row_divide.txt")"
else echo "   row_divide: MISSING"; fi

echo "== compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 30 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 1. verify (background): solder run --backend cuda against float64 ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 80 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
( timeout 85 nice -n 10 xargs -d '\n' -P 6 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt" ) &
verify_pid=$!

echo "== 2. solder bench: quant_gemm Q1-Q10, rmsnorm_gemm L1-L2 whole ($(left) s left)"
suite_commands "$S" "$out" > "$out/cmds.txt"
while IFS= read -r line; do
  [ "$(left)" -gt 65 ] || { echo "   deadline: skipped $line"; continue; }
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done < "$out/cmds.txt"
pack

echo "== 3. the row kernels alone, interleaved: new / old division x 1 / 2 blocks per SM ($(left) s left)"
: > "$out/rows.txt"
row_bench() {  # label, variant, env, args...
  local label=$1 v=$2 env=$3; shift 3
  [ "$(left)" -gt 55 ] || { echo "   deadline: skipped $label $v" | tee -a "$out/rows.txt"; return; }
  env $env timeout 15 "$S" bench "$@" --replays 30 --json > "/tmp/qrow2-$label-$v.json" 2> "/tmp/qrow2-$label-$v.err"
  python3 - "$label" "$v" "/tmp/qrow2-$label-$v.json" <<'PY' | tee -a "$out/rows.txt"
import json, sys
label, v, path = sys.argv[1:4]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
    print(f"rows {label:3} {v:6} {r['median_us']:8.2f} us  floor {r['floor_us']:6.2f} us  {r.get('gbs', 0):6.0f} GB/s")
except Exception as e:
    print(f"rows {label:3} {v:6} ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
  sed "s/^{/{\"variant\": \"$v\", \"row\": \"$label\", /" "/tmp/qrow2-$label-$v.json" >> "$out/rows.jsonl" 2>/dev/null
}
echo "$ROW_CASES" | while IFS='|' read -r label args; do
  echo "$ROW_VARIANTS" | while IFS='|' read -r v env; do row_bench "$label" "$v" "$env" $args; done
  [ "$label" = Q8 ] && row_bench "$label" new0b SOLDER_ROW_BLOCKS_PER_SM=0 $args  # the default again: the drift
done
pack

echo "== 4. A/B whole: 2 blocks per SM; the old division at Q8 ($(left) s left)"
echo "$WHOLE_AB" | while IFS='|' read -r label env filter; do
  [ "$(left)" -gt 47 ] || { echo "   deadline: skipped $label"; continue; }
  grep -F -- "$filter" "$out/cmds.txt" | sed "s|$out/solder.jsonl|$out/solder-ab.jsonl|" | while IFS= read -r line; do
    env $env sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $label"
    tail -1 "$out/solder-ab.jsonl" | sed "s/^{/{\"ab\": \"$label\", /" >> "$out/solder-ab-labelled.jsonl"
  done
done
pack

echo "== 5. peers, same call ($(left) s left)"
t0=$(date +%s); while kill -0 "$verify_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 3 ]; do sleep 1; done
cat "$out/verify.txt"; echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") (so far)"
bg_stop $(( $(left) > 60 ? 5 : 0 ))
for c in "$CELLS_FIRST" "$CELLS_REST"; do
  [ "$(left)" -gt 12 ] || { echo "   deadline: skipped peers $c"; continue; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 6 )) python3 "$R/bench/peers.py" --suite reductions --cases "$c" \
    --peers compile --compile-mode default --no-ceilings --out "$out/peers.jsonl" --time-limit $(( $(left) - 16 > 3 ? $(left) - 16 : 3 )) \
    >> "$out/peers.log" 2>&1
  echo "   peers $c rc $? ($(left) s left)"
done
pack

echo "== 6. ncu of Q8's row kernel ($(left) s left)"
if [ "$(left)" -gt 12 ] && command -v ncu >/dev/null; then
  timeout $(( $(left) - 5 )) ncu --clock-control none -k regex:fused_ --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__inst_executed_pipe_xu.sum,launch__grid_size \
    --csv --page raw "$S" run --backend cuda $ROWS $Q --dim K=2048 > "$out/ncu.Q8.csv" 2> "$out/ncu.Q8.err"
  echo "   ncu rc $?"
fi

wait "$verify_pid" 2>/dev/null
echo "== summary ($(left) s left)"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
def rows(name):
    try:
        return [json.loads(l) for l in open(os.path.join(out, name)) if l.strip().startswith("{")]
    except OSError:
        return []
def key(r):
    d = r.get("dims") or r.get("overrides") or {}
    return (r.get("program") or r.get("workload") or r.get("case", "").split("-")[0],) + tuple(sorted((k, int(v)) for k, v in d.items()))
default = {key(r): r["median_us"] for r in rows("peers.jsonl") if r.get("median_us") and r.get("status", "ok") == "ok"}
ab = {}
for r in rows("solder-ab-labelled.jsonl"):
    ab.setdefault(key(r), []).append(f"{r['ab']} {r['median_us']:.2f}")
print(f"{'case':44s} {'solder':>8s} {'compile':>8s} {'ratio':>6s}  A/B (same call)")
for r in rows("solder.jsonl"):
    k = key(r); p = default.get(k)
    f = lambda x: f"{x:8.2f}" if x else "       -"
    rr = lambda x: f"{r['median_us'] / x:6.3f}" if x else "     -"
    print(f"{' '.join(str(x) if not isinstance(x, tuple) else f'{x[0]}={x[1]}' for x in k):44s} {r['median_us']:8.2f} {f(p)} {rr(p)}  {'; '.join(ab.get(k, []))}")
print()
for name in ("rows.txt", "verify.txt", "row_divide.txt"):
    try:
        for line in open(os.path.join(out, name)):
            print(line.rstrip())
    except OSError:
        pass
    print()
PY
cp "$out/summary.txt" "$O/summary.txt" 2>/dev/null
pack
echo "== done ($(left) s left)"
