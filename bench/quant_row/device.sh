#!/usr/bin/env bash
# One device call for issue 15, eleventh session, branch quant-row: quant_gemm's row kernel pipelined
# over row blocks (bench/NOTES.md, "the row kernel pipelined over row blocks"). Most important first,
# each part written to $OUT as it finishes:
#   1. `solder run --backend cuda` (float64 reference) of the row kernels alone (quant_rows at Q5/Q8,
#      Q1, Q2/Q9, Q3, Q4, ragged, long ragged, small; rmsnorm_rows L1), of quant_gemm Q8, Q2, Q1, Q9,
#      Q7, ragged and small, rmsnorm_gemm L1 and softmax, on the new (pipelined) row kernels, in the
#      background on the CPU (one short GPU run each);
#   2. `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm L1-L2 whole (the default);
#   3. the row kernels alone (`solder bench`): SOLDER_ROW_BLOCKS_PER_SM = 1 (the default) and 0 (the
#      previous, one row block per block) at Q8, Q1, Q2, Q3 and rmsnorm L1, 2 at Q8; then Q8 and Q2
#      whole with the previous row kernel, and Q4 whole with 128x256 forced (the model picks 128x224);
#   4. the peers in the same call: torch.compile default mode for Q1-Q10 and L1-L2 (Inductor's
#      compiles warm in the background from the start, untimed), the missed cells first; then with
#      the time left, max-autotune-no-cudagraphs at Q8 and Q2 (its autotuning times kernels on the
#      GPU, so nothing of Solder's runs beside it);
#   5. ncu of Q8's row kernel (DRAM throughput, registers, warps) if time is left.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, tree/device, cache/), inside the
# device's tree (examples/ and bench/ are read from the tree two levels up):
#   cd .devcarry/quant-row && DEADLINE=150 bash device.sh
# bench/quant_row/stage.sh builds the carry folder on the build machine.
set -uo pipefail
R=${TREE:-../..}
ROWS=$R/bench/programs/quant_rows.sol
RMS=$R/bench/programs/rmsnorm_rows.sol
Q="--dim M=4096"
# The row kernels alone: label | program and dims (Q8's row is Q5's: K 2048; Q9's is Q2's: K 1536).
ROW_CASES="Q8|$ROWS $Q --dim K=2048
Q1|$ROWS $Q --dim K=2560
Q2|$ROWS $Q --dim K=1536
Q3|$ROWS $Q --dim K=8192
Q4|$ROWS $Q --dim K=3584
L1|$RMS"
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
rms_rows.L1||$RMS
quant_gemm.Q8||$R/examples/quant_gemm.sol $Q --dim N=768 --dim K=2048
quant_gemm.Q2||$R/examples/quant_gemm.sol $Q --dim N=2560 --dim K=1536
quant_gemm.Q1||$R/examples/quant_gemm.sol $Q --dim N=1536 --dim K=2560
quant_gemm.Q9||$R/examples/quant_gemm.sol $Q --dim N=4096 --dim K=1536
quant_gemm.Q7||$R/examples/quant_gemm.sol $Q --dim N=2048 --dim K=768
quant_gemm.ragged||$R/examples/quant_gemm.sol --dim M=1003 --dim N=264 --dim K=2048
quant_gemm.small||$R/examples/quant_gemm.sol --small
rmsnorm_gemm.L1||$R/examples/rmsnorm_gemm.sol
softmax.default||$R/examples/softmax.sol"
suite_commands() {  # SOLDER OUTDIR
  python3 "$R/bench/suites.py" --suite reductions --cases '^(quant_gemm|rmsnorm_gemm)-' --solder-commands --solder "$1" --timeout 25 \
    --out "$2/solder.jsonl" | sed "s| examples/| $R/examples/|"
}
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$ROW_CASES" | while IFS='|' read -r label args; do
    for n in 0 1 2; do echo "env SOLDER_ROW_BLOCKS_PER_SM=$n timeout 100 $1 bench $args --compile-only"; done; done
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
  suite_commands "$1" /tmp | sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /timeout 100 /'
  echo "env SOLDER_GEMM_TILE=128x256s4k1@4096,8192,3584 timeout 100 $1 bench $R/examples/quant_gemm.sol $Q --dim N=8192 --dim K=3584 --compile-only"
  suite_commands "$1" /tmp | grep -E 'N=768 --dim K=2048|N=2560 --dim K=1536' |
    sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /env SOLDER_ROW_BLOCKS_PER_SM=0 timeout 100 /'
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

# Everything is written under /tmp/qrow; $OUT gets qrow.tgz (all of it) and summary.txt (at most 8 files come back).
O=${OUT:-/tmp/out}; out=/tmp/qrow; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
pack() { tar czf "$O/qrow.tgz" -C /tmp qrow 2>/dev/null; }
[ -f payload.tgz ] && tar xzf payload.tgz  # stage.sh: solder, libgomp, tree/, cache/
chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m)" | tee -a "$out/device.txt"

# Inductor's compiles (default mode, untimed: 2 replays), the missed cells first.
CELLS_FIRST='^(quant_gemm-Q(1|2|7|8|9)|rmsnorm_gemm-L1)$'
CELLS_REST='^(quant_gemm-Q(3|4|5|6|10)|rmsnorm_gemm-L2)$'
( for c in "$CELLS_FIRST" "$CELLS_REST"; do
    PYTHONUNBUFFERED=1 timeout 90 python3 "$R/bench/peers.py" --suite reductions --cases "$c" --peers compile \
      --compile-mode default --reps 2 --warmup 1 --no-ceilings --out /tmp/qrow-peers-warm.jsonl >> "$out/peers-warm.txt" 2>&1 &
    echo $! > /tmp/qrow-bg; wait
  done ) &
warm_pid=$!
bg_stop() {  # $1: seconds to wait for the background warm-up before stopping it
  local t0; t0=$(date +%s)
  while kill -0 "$warm_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$1" ]; do sleep 1; done
  kill "$warm_pid" 2>/dev/null; [ -f /tmp/qrow-bg ] && kill "$(cat /tmp/qrow-bg)" 2>/dev/null
  echo "   warm-up: $(grep -c '"status": "ok"' /tmp/qrow-peers-warm.jsonl 2>/dev/null) peers compiled"
}

echo "== compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 40 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 1. verify (background): solder run --backend cuda against float64 ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 90 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
( timeout 100 nice -n 10 xargs -d '\n' -P 6 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt" ) &
verify_pid=$!

echo "== 2. solder bench: quant_gemm Q1-Q10, rmsnorm_gemm L1-L2 whole ($(left) s left)"
suite_commands "$S" "$out" > "$out/cmds.txt"
while IFS= read -r line; do
  [ "$(left)" -gt 85 ] || { echo "   deadline: skipped $line"; continue; }
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done < "$out/cmds.txt"
pack

echo "== 3. the row kernels alone: SOLDER_ROW_BLOCKS_PER_SM 1 (default) / 0 (previous), 2 at Q8 ($(left) s left)"
: > "$out/rows.txt"
row_bench() {  # label, blocks per SM, args...
  local label=$1 n=$2; shift 2
  [ "$(left)" -gt 72 ] || { echo "   deadline: skipped $label per_sm=$n" | tee -a "$out/rows.txt"; return; }
  env SOLDER_ROW_BLOCKS_PER_SM=$n timeout 15 "$S" bench "$@" --replays 30 --json > "/tmp/qrow-$label-$n.json" 2> "/tmp/qrow-$label-$n.err"
  python3 - "$label" "$n" "/tmp/qrow-$label-$n.json" <<'PY' | tee -a "$out/rows.txt"
import json, sys
label, n, path = sys.argv[1:4]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
    print(f"rows {label:3} per_sm={n}  {r['median_us']:8.2f} us  floor {r['floor_us']:6.2f} us  {r.get('gbs', 0):6.0f} GB/s  blocks {r.get('blocks', '-')}")
except Exception as e:
    print(f"rows {label:3} per_sm={n}  ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
  cat "/tmp/qrow-$label-$n.json" >> "$out/rows.jsonl" 2>/dev/null
}
echo "$ROW_CASES" | grep -v '^Q4|' | while IFS='|' read -r label args; do
  for n in 1 0; do row_bench "$label" "$n" $args; done
  [ "$label" = Q8 ] && row_bench "$label" 2 $args
done
pack

echo "== 3b. A/B whole: the previous row kernel at Q8, Q2; Q4 with 128x256 ($(left) s left)"
# The A/B in the same call: the previous row kernel inside the whole program at Q8, Q2, Q1.
grep -E 'N=768 --dim K=2048|N=2560 --dim K=1536' "$out/cmds.txt" | sed "s|$out/solder.jsonl|$out/solder-per_sm0.jsonl|" |
while IFS= read -r line; do
  [ "$(left)" -gt 60 ] || { echo "   deadline: skipped $line"; continue; }
  SOLDER_ROW_BLOCKS_PER_SM=0 sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done
# Q4 whole with 128x256 forced (the model's 128x224 against the tile measured 2-5 % faster alone).
if [ "$(left)" -gt 58 ]; then
  SOLDER_GEMM_TILE=128x256s4k1@4096,8192,3584 timeout 25 "$S" bench $R/examples/quant_gemm.sol $Q --dim N=8192 --dim K=3584 --json \
    >> "$out/solder-q4-128x256.jsonl" 2>> "$out/solder.err"
fi
pack

echo "== 4. peers, same call ($(left) s left)"
t0=$(date +%s); while kill -0 "$verify_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 5 ]; do sleep 1; done
cat "$out/verify.txt"; echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") (so far)"
bg_stop $(( $(left) > 80 ? 8 : 0 ))
for c in "$CELLS_FIRST" "$CELLS_REST"; do
  [ "$(left)" -gt 30 ] || { echo "   deadline: skipped peers $c"; continue; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 20 )) python3 "$R/bench/peers.py" --suite reductions --cases "$c" \
    --peers compile --compile-mode default --no-ceilings --out "$out/peers.jsonl" --time-limit $(( $(left) - 35 > 5 ? $(left) - 35 : 5 )) \
    >> "$out/peers.log" 2>&1
  echo "   peers $c rc $? ($(left) s left)"
done
pack
if [ "$(left)" -gt 45 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 12 )) python3 "$R/bench/peers.py" --suite reductions --cases '^quant_gemm-Q(8|2)$' \
    --peers compile --compile-mode max-autotune-no-cudagraphs --no-ceilings --out "$out/peers-autotune.jsonl" --time-limit 5 \
    > "$out/peers-autotune.log" 2>&1
  echo "   max-autotune Q8/Q2 rc $? ($(left) s left)"
fi
pack

echo "== 5. ncu of Q8's row kernel ($(left) s left)"
if [ "$(left)" -gt 15 ] && command -v ncu >/dev/null; then
  timeout $(( $(left) - 5 )) ncu --clock-control none -k regex:fused_ --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__occupancy_limit_registers \
    --csv --page raw "$S" run --backend cuda $ROWS $Q --dim K=2048 > "$out/ncu.Q8.csv" 2> "$out/ncu.Q8.err"
  echo "   ncu rc $?"
fi

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
def peer_map(name):
    return {key(r): r["median_us"] for r in rows(name) if r.get("median_us") and r.get("status", "ok") == "ok"}
default, autotune = peer_map("peers.jsonl"), peer_map("peers-autotune.jsonl")
old = {key(r): r["median_us"] for r in rows("solder-per_sm0.jsonl")}
print(f"{'case':44s} {'solder':>8s} {'old row':>8s} {'compile':>8s} {'ratio':>6s} {'autotune':>8s} {'ratio':>6s}")
for r in rows("solder.jsonl"):
    k = key(r); p = default.get(k); a = autotune.get(k); o = old.get(k)
    f = lambda x: f"{x:8.2f}" if x else "       -"
    rr = lambda x: f"{r['median_us'] / x:6.3f}" if x else "     -"
    print(f"{' '.join(str(x) if not isinstance(x, tuple) else f'{x[0]}={x[1]}' for x in k):44s} {r['median_us']:8.2f} {f(o)} {f(p)} {rr(p)} {f(a)} {rr(a)}")
for r in rows("solder-q4-128x256.jsonl"):
    print(f"quant_gemm Q4 whole, 128x256 forced: {r['median_us']:.2f} us")
print()
for name in ("rows.txt", "verify.txt"):
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
