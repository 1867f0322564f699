#!/usr/bin/env bash
# One device call for issue 15, branch gemm-s7 (2026-11-27): the one-consumer step term refitted
# (src/plan/cost_model.h, one_consumer_step_cycles), which moves ffn / gated_ffn S2 / S3 / S7's down
# projections to 64 x 64 deep rings, G6's rings, and moe_routing R6's logits (bench/tile_choices.sh lists
# every move). No device code changed, so no device test runs here (gemm-deep's call ran the deep-ring
# family, 224 / 224, on the same skeleton).
#   1. `solder run --backend cuda` (float64 reference) of every moved cell;
#   2. A/B (`solder bench`, 20 replays): each moved cell with the new choice and with SOLDER_GEMM_TILE
#      forcing the old one, interleaved (new, old, new, old);
#   3. `solder bench` of gemm_chains ffn / gated_ffn S1-S8 and G6 and moe_routing R6 (bench/suites.py);
#   4. eager (cuBLAS) at the same cells in the same call (bench/peers.py).
# Run from the carry folder (stripped solder, libgomp, tree/device, cache/, examples/, bench/*.py):
#   cd .devcarry/gemm-s7 && DEADLINE=220 bash gemm_s7_device.sh
# With $OUT set, the results folder is tarred into it after every section and the summary copied there.
set -uo pipefail
S1="--dim M=128 --dim N=8192 --dim K=3072 --dim L=3072"; S2="--dim M=128 --dim N=5632 --dim K=2048 --dim L=2048"
S3="--dim M=128 --dim N=11008 --dim K=4096 --dim L=4096"; S7="--dim M=128 --dim N=9728 --dim K=2560 --dim L=2560"
G6="--dim M=128 --dim N=4096 --dim K=1024 --dim L=1024"; R6="--dim T=2048 --dim HID=2048 --dim E=64 --dim K=6"
# label | env (the old choice, forced) | program and dims
AB="ffn-S7|SOLDER_GEMM_TILE=64x192s7k4@128,2560,9728|examples/ffn.sol $S7
gated_ffn-S7|SOLDER_GEMM_TILE=64x192s7k4@128,2560,9728|examples/gated_ffn.sol $S7
ffn-S2|SOLDER_GEMM_TILE=128x64s6k4@128,2048,5632|examples/ffn.sol $S2
gated_ffn-S2|SOLDER_GEMM_TILE=128x64s6k4@128,2048,5632|examples/gated_ffn.sol $S2
ffn-S3|SOLDER_GEMM_TILE=128x64s6k2@128,4096,11008|examples/ffn.sol $S3
gated_ffn-S3|SOLDER_GEMM_TILE=128x64s6k2@128,4096,11008|examples/gated_ffn.sol $S3
moe-R6|SOLDER_GEMM_TILE=64x64s9k4@2048,64,2048|examples/moe_routing.sol $R6"
# label | `solder run --backend cuda` arguments (the new choices)
VERIFY="ffn.S7|examples/ffn.sol $S7
gated_ffn.S7|examples/gated_ffn.sol $S7
ffn.S2|examples/ffn.sol $S2
gated_ffn.S2|examples/gated_ffn.sol $S2
ffn.S3|examples/ffn.sol $S3
gated_ffn.S3|examples/gated_ffn.sol $S3
ffn.G6|examples/ffn.sol $G6
gated_ffn.G6|examples/gated_ffn.sol $G6
moe.R6|examples/moe_routing.sol $R6"
CASES='^(ffn|gated_ffn)-(S[1-8]|G6)$'
suite_commands() {  # SOLDER OUTDIR
  python3 bench/suites.py --suite gemm_chains --cases "$CASES" --solder-commands --solder "$1" --timeout 25 --out "$2/solder-suites.jsonl"
  python3 bench/suites.py --suite reductions --cases '^moe_routing-R6$' --solder-commands --solder "$1" --timeout 25 --out "$2/solder-suites.jsonl"
}
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$AB" | while IFS='|' read -r label env args; do
    echo "timeout 100 $1 bench $args --compile-only"; echo "env $env timeout 100 $1 bench $args --compile-only"; done
  echo "$VERIFY" | while IFS='|' read -r label args; do echo "timeout 100 $1 bench $args --compile-only"; done
  suite_commands "$1" /tmp | sed -e 's/ --json >>.*$/ --compile-only/' -e 's/^timeout 25 /timeout 100 /'
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # the build machine's precompile

O=${OUT:-/tmp/out}; out=$O/s7; mkdir -p "$out"
start=$(date +%s); left() { echo $(( ${DEADLINE:-220} - ($(date +%s) - start) )); }
pack() { tar czf "$O/gemm-s7.tgz" -C "$O" s7; }
chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
export SOLDER_COMMIT=$(cat commit.txt 2>/dev/null | cut -d' ' -f1)
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null)" | tee -a "$out/device.txt"

echo "== compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 60 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   lines: $(grep -c 'compiled in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 1. verify: solder run --backend cuda against float64 ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
timeout 80 xargs -P 9 -L 1 sh -c '
  IFS="|" read -r label args <<EOF
$*
EOF
  if timeout 75 $S run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr "\n" " ")"; fi' _ < "$out/verify-list.txt" | tee "$out/verify.txt"
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt")"
pack

echo "== 2. A/B: new choice against the old, forced, interleaved ($(left) s left)"
: > "$out/ab.txt"
for round in 1 2; do
  echo "$AB" | while IFS='|' read -r label env args; do
    [ "$(left)" -gt 110 ] || { echo "   deadline: skipped $label round $round" | tee -a "$out/ab.txt"; continue; }
    for which in new old; do
      e=""; [ $which = old ] && e="$env"
      env $e timeout 20 $S bench $args --replays 20 > "/tmp/s7-$label-$which.txt" 2>&1
      printf '%-14s %-4s r%s %s\n' "$label" "$which" "$round" "$(grep -E 'time +median' "/tmp/s7-$label-$which.txt" | sed 's/^ *//' || echo "failed: $(tail -c 200 "/tmp/s7-$label-$which.txt" | tr '\n' ' ')")" | tee -a "$out/ab.txt"
      { echo "## $label $which r$round: $e $args"; cat "/tmp/s7-$label-$which.txt"; } >> "$out/ab-full.txt"
    done
  done
done
pack

echo "== 3. solder bench: ffn / gated_ffn S1-S8, G6, moe_routing R6 ($(left) s left)"
suite_commands "$S" "$out" > "$out/cmds.txt"
while IFS= read -r line; do
  [ "$(left)" -gt 50 ] || { echo "   deadline: skipped $line"; continue; }
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done < "$out/cmds.txt"
pack

echo "== 4. eager (cuBLAS), same call ($(left) s left)"
[ "$(left)" -gt 20 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 12 )) python3 bench/peers.py --suite gemm_chains --cases "$CASES" \
  --peers eager --no-ceilings --out "$out/peers.jsonl" --time-limit $(( $(left) > 60 ? 35 : 15 )) > "$out/peers.log" 2>&1
[ "$(left)" -gt 8 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 4 )) python3 bench/peers.py --suite reductions --cases '^moe_routing-R6$' \
  --peers eager --no-ceilings --out "$out/peers.jsonl" --time-limit 8 >> "$out/peers.log" 2>&1
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
for r in rows("peers.jsonl"):
    if r.get("median_us") and r.get("status", "ok") == "ok":
        peers.setdefault(key(r), {})[r.get("peer")] = r["median_us"]
print(f"{'case':44s} {'solder us':>10s} {'eager us':>10s} {'ratio':>6s}")
for r in rows("solder-suites.jsonl"):
    k = key(r); p = peers.get(k, {}).get("eager")
    ratio = f"{r['median_us'] / p:6.3f}" if p and r.get("median_us") else "    - "
    dims = " ".join(f"{a}={b}" for a, b in k[1])
    print(f"{k[0] + ' ' + dims:44s} {r.get('median_us') or 0:10.2f} {p or 0:10.2f} {ratio}")
print()
for name in ("verify.txt", "ab.txt"):
    try:
        for line in open(os.path.join(out, name)):
            print(line.rstrip())
    except OSError:
        pass
    print()
PY
cp "$out/summary.txt" "$O/summary.txt"
pack
echo "== done ($(left) s left)"
