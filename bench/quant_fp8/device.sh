#!/usr/bin/env bash
# One device call for issue 15, tenth session, branch quant-fp8: the fp8 tile of quant_gemm at Q2-Q9
# (bench/NOTES.md, "the fp8 tile at Q2-Q4" in the ninth session's gemm-deep section, and this branch's
# section). Most important first, each part written to $OUT as it finishes:
#   1. the skeleton's device test, the new family " qtile" (fp8 128x224 / 128x256 / 128x160 tiles with
#      the staged row stores, no cluster, 2 x 1 and 2 x 2 clusters, ragged shapes);
#   2. `solder run --backend cuda` (float64 reference) of quant_gemm with the candidate tiles forced
#      (SOLDER_GEMM_TILE), in the background on the CPU (one short GPU run each);
#   3. the fp8 tile sweep, the GEMM alone (bench/programs/fp8_rowscale_gemm.sol, SOLDER_GEMM_TILE /
#      SOLDER_GEMM_SCHEDULE) at Q3, Q4, Q2, the old choice measured first and last;
#   4. `solder bench` of quant_gemm Q1-Q10 (the planner's choice);
#   5. the peers in the same call: torch.compile (default mode) of quant_gemm Q1-Q10 (bench/peers.py;
#      Inductor's compiles warm in the background from the start, nothing of theirs timed there), and
#      torch._scaled_mm alone at the swept shapes (bench/quant_fp8/peers.py);
#   6. quant_gemm whole with candidate tiles forced (Q3, Q4, Q2, Q5) and as one kernel (Q8, Q3);
#   7. the rest of the sweep: Q2, Q5, Q9, Q8 (deadline guard);
#   in the background after the warm-up: torch.profiler's kernel names of _scaled_mm and torch.compile's
#   quant_gemm at Q3 / Q4 / Q2.
# Run from the carry folder (payload.tgz: stripped solder and test_sm90_gemm, libgomp, tree/device, cache/; peers.py),
# inside the device's tree (examples/ and bench/ are read from the tree two levels up):
#   cd .devcarry/quant-fp8 && DEADLINE=150 bash device.sh
# bench/quant_fp8/stage.sh builds the carry folder on the build machine.
set -uo pipefail
Q2="--dim M=4096 --dim N=2560 --dim K=1536"; Q3="--dim M=4096 --dim N=3584 --dim K=8192"; Q4="--dim M=4096 --dim N=8192 --dim K=3584"
Q5="--dim M=4096 --dim N=7168 --dim K=2048"; Q8="--dim M=4096 --dim N=768 --dim K=2048"; Q9="--dim M=4096 --dim N=4096 --dim K=1536"
R=${TREE:-../..}
P=$R/bench/programs/fp8_rowscale_gemm.sol
PP="SOLDER_GEMM_SCHEDULE=pingpong"
# label | env | program and dims. The old choice (`solder emit --report`) first and last per shape.
sweep_lines() {  # $1: Q-case; $2...: tiles (a tile ending in "pp" runs the ping-pong schedule)
  local q=$1; shift
  for t in "$@"; do
    case $t in *pp) echo "$q-$t|SOLDER_GEMM_TILE=${t%pp} $PP|$P ${!q}" ;; *) echo "$q-$t|SOLDER_GEMM_TILE=$t|$P ${!q}" ;; esac
  done
}
SWEEP1="$(sweep_lines Q3 128x224s4k1 128x224s4k1c2x1 128x256s4k1c2x1 128x224s4k1c2x2 128x256s4k1 64x256s4k1c2x1pp 128x224s4k1
sweep_lines Q4 128x224s4k1 128x224s4k1c2x1 128x256s4k1c2x1 128x256s4k1 64x256s4k1c2x1pp 128x224s4k1
sweep_lines Q2 128x160s5k1 128x160s5k1c2x1 64x256s4k1c2x1pp 128x160s5k1)"
SWEEP2="$(sweep_lines Q2 128x128s6k1c2x1 128x256s4k1c2x1
sweep_lines Q5 128x256s4k1 128x256s4k1c2x1 128x224s4k1c2x1 64x256s4k1c2x1pp
sweep_lines Q9 64x256s4k1c2x1pp 128x256s4k1 128x256s4k1c2x1 128x224s4k1c2x1
sweep_lines Q8 128x192s4k1 128x192s4k1c2x1 128x96s5k1 64x192s4k1pp)"
# quant_gemm whole with the candidates forced (the product's M,N,K named: the row kernel keeps its plan),
# and as one kernel (SOLDER_PROLOGUE_PLAN=one: the quantisation in the skeleton's operand prologue).
WHOLE="Q3-whole-128x224s4k1c2x1|SOLDER_GEMM_TILE=128x224s4k1c2x1@4096,3584,8192|$R/examples/quant_gemm.sol $Q3
Q4-whole-128x256s4k1c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@4096,8192,3584|$R/examples/quant_gemm.sol $Q4
Q2-whole-64x256s4k1c2x1pp|SOLDER_GEMM_TILE=64x256s4k1c2x1@4096,2560,1536 $PP|$R/examples/quant_gemm.sol $Q2
Q5-whole-128x256s4k1c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@4096,7168,2048|$R/examples/quant_gemm.sol $Q5
Q8-whole-one-kernel|SOLDER_PROLOGUE_PLAN=one|$R/examples/quant_gemm.sol $Q8
Q3-whole-one-kernel|SOLDER_PROLOGUE_PLAN=one|$R/examples/quant_gemm.sol $Q3"
# label | env | `solder run --backend cuda` arguments: the candidates in generated code, against float64.
VERIFY="quant_gemm.Q3.128x224c2x1|SOLDER_GEMM_TILE=128x224s4k1c2x1@4096,3584,8192|$R/examples/quant_gemm.sol $Q3
quant_gemm.Q4.128x256c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@4096,8192,3584|$R/examples/quant_gemm.sol $Q4
quant_gemm.Q4.128x224c2x1|SOLDER_GEMM_TILE=128x224s4k1c2x1@4096,8192,3584|$R/examples/quant_gemm.sol $Q4
quant_gemm.Q2.128x160c2x1|SOLDER_GEMM_TILE=128x160s5k1c2x1@4096,2560,1536|$R/examples/quant_gemm.sol $Q2
quant_gemm.Q5.128x256c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@4096,7168,2048|$R/examples/quant_gemm.sol $Q5
quant_gemm.Q9.128x256c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@4096,4096,1536|$R/examples/quant_gemm.sol $Q9
quant_gemm.ragged.128x224c2x2|SOLDER_GEMM_TILE=128x224s4k1c2x2|$R/examples/quant_gemm.sol --dim M=1003 --dim N=1000 --dim K=8200
quant_gemm.ragged.128x224c2x1|SOLDER_GEMM_TILE=128x224s4k1c2x1|$R/examples/quant_gemm.sol --dim M=1003 --dim N=264 --dim K=2056"
suite_commands() {  # SOLDER OUTDIR
  python3 "$R/bench/suites.py" --suite reductions --cases '^quant_gemm-' --solder-commands --solder "$1" --timeout 25 \
    --out "$2/solder-quant.jsonl" | sed "s| examples/| $R/examples/|"
}
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  printf '%s\n%s\n%s\n%s\n' "$SWEEP1" "$SWEEP2" "$WHOLE" "$VERIFY" | while IFS='|' read -r label env args; do
    echo "env $env timeout 100 $1 bench $args --compile-only"; done
  suite_commands "$1" /tmp | sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /timeout 100 /'
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

O=${OUT:-/tmp/out}; out=$O/qf8; mkdir -p "$out"
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
pack() { tar czf "$O/qf8.tgz" -C "$O" qf8 2>/dev/null; }
[ -f payload.tgz ] && tar xzf payload.tgz  # stage.sh: solder, test_sm90_gemm, libgomp, tree/, cache/
chmod +x solder test_sm90_gemm 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m)" | tee -a "$out/device.txt"

# Inductor's compiles of quant_gemm Q1-Q10 (untimed: 2 replays), then the profiler's kernel names.
# Each python runs under `timeout`, which passes a TERM on to it (bg_stop).
( PYTHONUNBUFFERED=1 timeout 100 python3 "$R/bench/peers.py" --suite reductions --cases '^quant_gemm-' --peers compile \
    --compile-mode default --reps 2 --warmup 1 --no-ceilings --out /tmp/qf8-peers-warm.jsonl > "$out/peers-warm.txt" 2>&1 &
  echo $! > /tmp/qf8-bg1; wait
  PYTHONUNBUFFERED=1 timeout 60 python3 peers.py --kernels Q3,Q4,Q2 --out "$out/peer-kernels.jsonl" > "$out/peer-kernels.txt" 2>&1 &
  echo $! > /tmp/qf8-bg2; wait ) &
warm_pid=$!
bg_stop() {  # $1: seconds to wait for the background peers' job before stopping it
  local t0; t0=$(date +%s)
  while kill -0 "$warm_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$1" ]; do sleep 1; done
  kill "$warm_pid" 2>/dev/null; for f in /tmp/qf8-bg1 /tmp/qf8-bg2; do [ -f $f ] && kill "$(cat $f)" 2>/dev/null; done
  echo "   background peers' job: $(tail -c 200 "$out/peer-kernels.txt" 2>/dev/null | tr '\n' ' ')"
}

echo "== compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 40 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 1. device test: quant_gemm's fp8 tiles ($(left) s left)"
GEMM_TEST_FILTER=" qtile" timeout 40 ./test_sm90_gemm 2026 > "$out/device-test-qtile.txt" 2>&1
echo "   rc=$? $(tail -1 "$out/device-test-qtile.txt")"; grep -E "^FAIL" "$out/device-test-qtile.txt" | head -5
pack

echo "== 2. verify (background): solder run --backend cuda against float64 ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 100 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
( timeout 110 nice -n 10 xargs -d '\n' -P 4 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt" ) &
verify_pid=$!

run_sweep() {  # $1: the lines; $2: seconds that must be left to start one
  echo "$1" | while IFS='|' read -r label env args; do
    [ "$(left)" -gt "$2" ] || { echo "   deadline: skipped $label" | tee -a "$out/sweep.txt"; continue; }
    env $env timeout 20 "$S" bench $args --replays 20 > "/tmp/qf8-$label.txt" 2>&1
    printf '%-30s %s\n' "$label" "$(grep -E 'time +median' "/tmp/qf8-$label.txt" | sed 's/^ *//' || echo "failed: $(tail -c 200 "/tmp/qf8-$label.txt" | tr '\n' ' ')")" | tee -a "$out/sweep.txt"
    { echo "## $label: $env $args"; cat "/tmp/qf8-$label.txt"; } >> "$out/sweep-full.txt"
  done
}
echo "== 3. sweep: the fp8 GEMM alone at Q3, Q4, Q2 ($(left) s left)"
: > "$out/sweep.txt"
run_sweep "$SWEEP1" 90
pack

echo "== 4. solder bench: quant_gemm Q1-Q10 (the planner's choice) ($(left) s left)"
suite_commands "$S" "$out" > "$out/cmds-quant.txt"
while IFS= read -r line; do
  [ "$(left)" -gt 75 ] || { echo "   deadline: skipped $line"; continue; }
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done < "$out/cmds-quant.txt"
pack

echo "== 5. peers, same call ($(left) s left)"
t0=$(date +%s); while kill -0 "$verify_pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 5 ]; do sleep 1; done
cat "$out/verify.txt"; echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") (so far)"
bg_stop $(( $(left) > 90 ? 10 : 0 ))
[ "$(left)" -gt 40 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 30 )) python3 "$R/bench/peers.py" --suite reductions --cases '^quant_gemm-' \
  --peers compile --compile-mode default --no-ceilings --out "$out/peers-quant.jsonl" --time-limit $(( $(left) > 90 ? 40 : 15 )) \
  > "$out/peers.log" 2>&1
[ "$(left)" -gt 25 ] && PYTHONUNBUFFERED=1 timeout 20 python3 peers.py --time Q3,Q4,Q2,Q5,Q9,Q8 --out "$out/scaled-mm.jsonl" \
  2>&1 | grep -v -i warn | tee "$out/scaled-mm.txt"
pack

echo "== 6. quant_gemm whole: candidates forced, one kernel ($(left) s left)"
run_sweep "$WHOLE" 20
pack

echo "== 7. sweep: Q2, Q5, Q9, Q8 ($(left) s left)"
run_sweep "$SWEEP2" 6
pack

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
    return tuple(sorted((k, int(v)) for k, v in d.items()))
peers = {key(r): r["median_us"] for r in rows("peers-quant.jsonl") if r.get("median_us") and r.get("status", "ok") == "ok"}
mm = {(r["m"], r["n"], r["k"]): r["scaled_mm_us"] for r in rows("scaled-mm.jsonl")}
print(f"{'quant_gemm':28s} {'solder us':>10s} {'compile us':>10s} {'ratio':>6s} {'_scaled_mm':>10s}")
for r in rows("solder-quant.jsonl"):
    k = key(r); p = peers.get(k); d = dict(k)
    ratio = f"{r['median_us'] / p:6.3f}" if p else "    - "
    m = mm.get((d.get("M"), d.get("N"), d.get("K")))
    print(f"{' '.join(f'{a}={b}' for a, b in k):28s} {r['median_us']:10.2f} {p or 0:10.2f} {ratio} {m or 0:10.2f}")
print()
for name in ("sweep.txt", "verify.txt", "scaled-mm.txt"):
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
