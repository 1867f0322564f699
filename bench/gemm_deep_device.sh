#!/usr/bin/env bash
# One device call for issue 15's ninth session (branch gemm-deep): deep rings (9-16 stages) and 2-D
# clusters (2 x 2, 2 x 4) in the GEMM skeleton, and the fp8 tile at quant_gemm's Q2-Q4 shapes.
#   1. the skeleton's device test, the new families (GEMM_TEST_FILTER: " deep" and " c2x");
#   2. `solder run --backend cuda` (float64 reference) of ffn / gated_ffn / quant_gemm at the suite shapes
#      whose plan changed, small sizes, and a forced 2 x 4 cluster and deep ring in generated code;
#   3. sweeps (`solder bench`, SOLDER_GEMM_TILE): ffn's M = 128 down projections at S1 / S2 / S6 / S7
#      (64 x 64: stages 8 / 10 / 13 / 14, clusters 1x1 / 1x4 / 2x1 / 2x4), and the fp8 GEMM alone
#      (bench/programs/fp8_rowscale_gemm.sol) at Q2 / Q3 / Q4 over the tiles that could win;
#   4. `solder bench` of gemm_chains ffn / gated_ffn S1-S8 and quant_gemm Q1-Q10 (the planner's choice);
#   5. the peers in the same call: eager (cuBLAS) at S1-S8, eager and torch.compile at Q1-Q10
#      (bench/peers.py; Inductor's compiles warm in the background during 1-3), torch._scaled_mm alone at
#      Q2-Q4 and the kernels torch.profiler sees there (bench/gemm_deep_peers.py).
# Run from the repository root of the device's tree:
#   BIN=.devcarry/gemm-deep bash .devcarry/gemm-deep/gemm_deep_device.sh OUTDIR DEADLINE_S
# BIN holds stripped `solder` and `test_sm90_gemm`, libgomp.so.1, tree/device (this branch's device
# headers: SOLDER_SOURCE_DIR) and cache/ (NVRTC cubins from `solder bench --compile-only` on the build
# machine); SOLDER_CUTLASS_INCLUDE names the CuTe headers. With $OUT set, OUTDIR is tarred into it after
# every section, and the summary goes to $OUT/summary.txt.
set -uo pipefail
S1="--dim M=128 --dim N=8192 --dim K=3072 --dim L=3072"; S2="--dim M=128 --dim N=5632 --dim K=2048 --dim L=2048"
S6="--dim M=128 --dim N=8960 --dim K=1536 --dim L=1536"; S7="--dim M=128 --dim N=9728 --dim K=2560 --dim L=2560"
Q2="--dim M=4096 --dim N=2560 --dim K=1536"; Q3="--dim M=4096 --dim N=3584 --dim K=8192"; Q4="--dim M=4096 --dim N=8192 --dim K=3584"
# label | env | program and dims (the sweeps: ffn's down projections, the fp8 GEMM alone)
SWEEP="S1-64x64s8|SOLDER_GEMM_TILE=64x64s8k1@128,3072,8192|examples/ffn.sol $S1
S1-64x64s13|SOLDER_GEMM_TILE=64x64s13k1@128,3072,8192|examples/ffn.sol $S1
S1-64x64s14|SOLDER_GEMM_TILE=64x64s14k1@128,3072,8192|examples/ffn.sol $S1
S1-64x64s13c1x4|SOLDER_GEMM_TILE=64x64s13k1c1x4@128,3072,8192|examples/ffn.sol $S1
S1-64x64s13c2x1|SOLDER_GEMM_TILE=64x64s13k1c2x1@128,3072,8192|examples/ffn.sol $S1
S1-64x64s8c2x4|SOLDER_GEMM_TILE=64x64s8k1c2x4@128,3072,8192|examples/ffn.sol $S1
S1-64x64s13c2x4|SOLDER_GEMM_TILE=64x64s13k1c2x4@128,3072,8192|examples/ffn.sol $S1
S1-64x64s13c2x2|SOLDER_GEMM_TILE=64x64s13k1c2x2@128,3072,8192|examples/ffn.sol $S1
S7-64x64s8|SOLDER_GEMM_TILE=64x64s8k1@128,2560,9728|examples/ffn.sol $S7
S7-64x64s13|SOLDER_GEMM_TILE=64x64s13k1@128,2560,9728|examples/ffn.sol $S7
S7-64x64s13c2x4|SOLDER_GEMM_TILE=64x64s13k1c2x4@128,2560,9728|examples/ffn.sol $S7
S2-64x64s8|SOLDER_GEMM_TILE=64x64s8k1@128,2048,5632|examples/ffn.sol $S2
S2-64x64s13|SOLDER_GEMM_TILE=64x64s13k1@128,2048,5632|examples/ffn.sol $S2
S2-64x64s13c2x4|SOLDER_GEMM_TILE=64x64s13k1c2x4@128,2048,5632|examples/ffn.sol $S2
S6-64x64s8|SOLDER_GEMM_TILE=64x64s8k1@128,1536,8960|examples/ffn.sol $S6
S6-64x64s13|SOLDER_GEMM_TILE=64x64s13k1@128,1536,8960|examples/ffn.sol $S6
S6-64x64s13c2x4|SOLDER_GEMM_TILE=64x64s13k1c2x4@128,1536,8960|examples/ffn.sol $S6"
for q in Q2 Q3 Q4; do
  extra=""; [ $q = Q2 ] && extra=128x192s5k1c2x2  # N 2560: 14 tile-columns of 192 (Q3, Q4: an odd count)
  for t in 128x256s4k1 128x224s4k1 128x192s5k1 128x128s6k1 128x256s4k1c2x1 128x256s4k1c1x2 128x128s6k1c2x2 $extra; do
    SWEEP="$SWEEP
$q-$t|SOLDER_GEMM_TILE=$t|bench/programs/fp8_rowscale_gemm.sol ${!q}"
  done
  SWEEP="$SWEEP
$q-64x256s4k1c2x1-pingpong|SOLDER_GEMM_TILE=64x256s4k1c2x1 SOLDER_GEMM_SCHEDULE=pingpong|bench/programs/fp8_rowscale_gemm.sol ${!q}
$q-default|SOLDER_GEMM_EPILOGUE=|bench/programs/fp8_rowscale_gemm.sol ${!q}"
done
# label | env | `solder run --backend cuda` arguments
VERIFY="ffn.S1||examples/ffn.sol $S1
ffn.S7||examples/ffn.sol $S7
gated_ffn.S1||examples/gated_ffn.sol $S1
quant_gemm.Q2||examples/quant_gemm.sol $Q2
quant_gemm.Q3||examples/quant_gemm.sol $Q3
quant_gemm.Q4||examples/quant_gemm.sol $Q4
ffn.S1.c2x4s13|SOLDER_GEMM_TILE=64x64s13k1c2x4@128,3072,8192|examples/ffn.sol $S1
quant_gemm.Q3.c2x2|SOLDER_GEMM_TILE=128x128s6k1c2x2@4096,3584,8192|examples/quant_gemm.sol $Q3
ffn.ragged.c2x4s14|SOLDER_GEMM_TILE=64x64s14k1c2x4|examples/ffn.sol --dim M=100 --dim N=1000 --dim K=264 --dim L=520
ffn.small||examples/ffn.sol --small
gated_ffn.small||examples/gated_ffn.sol --small
quant_gemm.small||examples/quant_gemm.sol --small"
suite_commands() {  # SOLDER OUTDIR: the suites' `solder bench` lines (bench/suites.py)
  python3 bench/suites.py --suite gemm_chains --cases '^(ffn|gated_ffn)-S[1-8]$' --solder-commands --solder "$1" --timeout 25 \
    --out "$2/solder-chains.jsonl" > "$2/cmds-chains.txt"
  python3 bench/suites.py --suite reductions --cases '^quant_gemm-' --solder-commands --solder "$1" --timeout 25 \
    --out "$2/solder-quant.jsonl" > "$2/cmds-quant.txt"
}
compile_commands() {  # SOLDER OUTDIR: every program of the call, --compile-only (NVRTC into the cache)
  echo "$SWEEP" | while IFS='|' read -r label env args; do echo "env $env SOLDER_COMPILE_JOBS=2 timeout 55 $1 bench $args --compile-only"; done
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $env SOLDER_COMPILE_JOBS=2 timeout 55 $1 bench $args --compile-only"; done
  sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /timeout 55 /' "$2/cmds-chains.txt" "$2/cmds-quant.txt"
}
if [ "${1:-}" = --list-compile ]; then  # bench/gemm_deep_stage.sh: the same lines on the build machine
  tmp=$(mktemp -d)
  suite_commands "$2" "$tmp"
  compile_commands "$2" "$tmp"
  rm -rf "$tmp"
  exit 0
fi

bin=${BIN:-.devcarry/gemm-deep}
out=${1:?usage: gemm_deep_device.sh OUTDIR DEADLINE_S}
deadline=${2:-210}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
mkdir -p "$out"
chmod +x "$bin/solder" "$bin/test_sm90_gemm" 2>/dev/null
export LD_LIBRARY_PATH=$PWD/$bin:${LD_LIBRARY_PATH:-}
export SOLDER_CACHE_DIR=$PWD/$bin/cache SOLDER_SOURCE_DIR=$PWD/$bin/tree SOLDER_COMMIT=${SOLDER_COMMIT:-gemm-deep}
S=$bin/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat "$bin/commit.txt" 2>/dev/null)" | tee -a "$out/device.txt"

# Inductor's compiles of quant_gemm (torch.compile, default mode) warm in the background: nothing of
# theirs is timed until step 5.
PYTHONUNBUFFERED=1 timeout 120 python3 bench/peers.py --suite reductions --cases '^quant_gemm-Q([2-4])$' --peers compile \
  --compile-mode default --reps 2 --warmup 1 --no-ceilings --out /tmp/peers-warm.jsonl > "$out/peers-warm.txt" 2>&1 &
warm_pid=$!

echo "== compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
suite_commands "$S" "$out"
compile_commands "$S" "$out" | timeout 70 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled: $(grep -c 'compiled in\|cached' "$out/compile.log") lines; errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 1. device test: deep rings and 2-D clusters ($(left) s left)"
for f in " deep" " c2x"; do
  GEMM_TEST_FILTER="$f" timeout 40 "$bin/test_sm90_gemm" 2026 > "$out/device-test-${f# }.txt" 2>&1
  echo "   '$f': rc=$? $(tail -1 "$out/device-test-${f# }.txt")"; grep -E "^FAIL" "$out/device-test-${f# }.txt" | head -5
done
pack

echo "== 2. verify: solder run --backend cuda against float64 ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
timeout 75 xargs -P 6 -L 1 sh -c '
  IFS="|" read -r label env args <<EOF
$*
EOF
  if env $env timeout 70 $S run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr "\n" " ")"; fi' _ < "$out/verify-list.txt" | tee "$out/verify.txt"
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt")"
pack

echo "== 3. sweeps: ffn's down projections, the fp8 GEMM at Q2-Q4 ($(left) s left)"
: > "$out/sweep.txt"
echo "$SWEEP" | while IFS='|' read -r label env args; do
  [ "$(left)" -gt 95 ] || { echo "   deadline: skipped $label" | tee -a "$out/sweep.txt"; continue; }
  env $env timeout 20 $S bench $args --replays 20 > "/tmp/gd-$label.txt" 2>&1
  printf '%-34s %s\n' "$label" "$(grep -E 'time +median' "/tmp/gd-$label.txt" | sed 's/^ *//' || echo "failed: $(tail -c 200 /tmp/gd-$label.txt | tr '\n' ' ')")" | tee -a "$out/sweep.txt"
  { echo "## $label: $env $args"; cat "/tmp/gd-$label.txt"; } >> "$out/sweep-full.txt"
done
pack

echo "== 4. solder bench: gemm_chains S1-S8, quant_gemm Q1-Q10 ($(left) s left)"
cat "$out/cmds-chains.txt" "$out/cmds-quant.txt" | while IFS= read -r line; do
  [ "$(left)" -gt 55 ] || { echo "   deadline: skipped $line"; continue; }
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done
pack

kill "$warm_pid" 2>/dev/null
echo "== 5. peers, same call ($(left) s left)"
[ "$(left)" -gt 30 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) > 80 ? 40 : $(left) / 2 )) python3 bench/peers.py --suite gemm_chains \
  --cases '^(ffn|gated_ffn)-S[1-8]$' --peers eager --no-ceilings --out "$out/peers-chains.jsonl" --time-limit 30 2>&1 | grep -E "rror" | tail -3
[ "$(left)" -gt 25 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 20 )) python3 bench/peers.py --suite reductions --cases '^quant_gemm-' \
  --peers eager,compile --compile-mode default --no-ceilings --out "$out/peers-quant.jsonl" --time-limit $(( $(left) > 60 ? $(left) - 45 : 10 )) 2>&1 | grep -E "rror" | tail -3
[ "$(left)" -gt 15 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 5 )) python3 "$bin/gemm_deep_peers.py" --cases Q3,Q4,Q2 --out "$out/peer-kernels.jsonl" \
  2>&1 | grep -v Warning | tee "$out/peer-kernels.txt" | head -40
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
    return (r.get("program") or r.get("workload"), tuple(sorted((k, int(v)) for k, v in d.items())))
peers = {}
for r in rows("peers-chains.jsonl") + rows("peers-quant.jsonl"):
    if r.get("median_us") and r.get("status", "ok") == "ok":
        k = key(r)
        peers.setdefault(k, {})[r.get("peer")] = r["median_us"]
print(f"{'case':34s} {'solder us':>10s} {'best peer':>10s} {'peer':>8s} {'ratio':>6s}  kernels")
for r in rows("solder-chains.jsonl") + rows("solder-quant.jsonl"):
    k = key(r)
    p = peers.get(k, {})
    best = min(p.items(), key=lambda kv: kv[1]) if p else (None, None)
    ratio = f"{r['median_us'] / best[1]:6.3f}" if best[1] else "    - "
    dims = " ".join(f"{a}={b}" for a, b in k[1])
    print(f"{k[0] + ' ' + dims:34s} {r['median_us']:10.2f} {best[1] or 0:10.2f} {best[0] or '-':>8s} {ratio}  {r.get('kernels')}")
print()
for line in open(os.path.join(out, "sweep.txt")):
    print(line.rstrip())
PY
[ -n "${OUT:-}" ] && cp "$out/summary.txt" "$OUT/summary.txt"
pack
echo "== done ($(left) s left)"
