#!/usr/bin/env bash
# One device call for conv_chain's chained kernel (issue 15, branch conv-chain), run from a folder that
# holds a stripped `solder`, examples/, bench/*.py and tests/gpu/conv_gather/*.sol (the device gets
# /work/main's tree; the branch's files travel in .devcarry/conv-chain):
#
#   bench/conv_chain_device.sh OUTDIR [DEADLINE_S]
#
#   1. every kernel of the call compiled in parallel (`solder bench --compile-only`, one per core);
#   2. verified through `solder run --backend cuda` (float64 reference): conv_chain small and at the
#      suite's cells C1, C5, C6, C7 (chained where the planner chains), C1 and C5 as two kernels
#      (SOLDER_GATHERED_CHAIN=0), a 28 × 28 cell chained by force (25 blocks), and tests/gpu/conv_gather's
#      programs as planned and with chains forced;
#   3. `solder bench` of C1, C5, C6, C7: as planned, then two kernels (SOLDER_GATHERED_CHAIN=0), then
#      without programmatic dependent launch (SOLDER_PDL=0);
#   4. the peers in the same call (bench/peers.py: torch eager = cuDNN's convolutions, torch.compile),
#      CUDA-graph replays, median;
#   5. ncu of the chained kernel at C5 (one launch), time permitting;
#   6. the summary table (last).
# Env: SOLDER_CUTLASS_INCLUDE (CuTe headers: without them `run` and `bench` switch every whole
# contraction off), SOLDER (the binary, default ./solder), VARIANTS (step 3's, default "default
# SOLDER_GATHERED_CHAIN=0 SOLDER_PDL=0"; "repeat" times the default again), RUNS=cells (verify only the
# four cells), COMPILE_MODE (peers.py's torch.compile mode, default max-autotune-no-cudagraphs), NCU=0.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/conv_chain_device.sh OUTDIR [DEADLINE_S]}
deadline=${2:-200}
S=${SOLDER:-./solder}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/inductor}
if [ ! -f "${SOLDER_CUTLASS_INCLUDE:-/nonexistent}/cute/tensor.hpp" ]; then
  echo "SOLDER_CUTLASS_INCLUDE has no cute/tensor.hpp: the whole contractions would be off; stopping" | tee "$out/ABORTED"
  exit 2
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; uname -m; cat COMMIT 2>/dev/null; } | tee "$out/device.txt"

cells="C1:--dim KS=1 --dim OC1=256 --dim OC2=64
C5:--dim KS=3 --dim OC1=64 --dim OC2=256
C6:--dim IC=128 --dim HH=28 --dim WW=28 --dim OC1=128 --dim OC2=512
C7:--dim IC=256 --dim HH=14 --dim WW=14 --dim OC1=256 --dim OC2=1024"
# verification runs: ENV|ARGS
{
  echo "|examples/conv_chain.sol --small"
  echo "$cells" | while IFS=: read -r tag dims; do echo "|examples/conv_chain.sol $dims"; done
  echo "SOLDER_GATHERED_CHAIN=0|examples/conv_chain.sol --dim KS=1 --dim OC1=256 --dim OC2=64"
  echo "SOLDER_GATHERED_CHAIN=0|examples/conv_chain.sol"
  echo "SOLDER_GATHERED_CHAIN=1|examples/conv_chain.sol --dim IC=128 --dim HH=28 --dim WW=28 --dim OC1=128 --dim OC2=128"
  echo "SOLDER_GATHERED_CHAIN=1|examples/conv_chain.sol --small"
  for p in tests/gpu/conv_gather/*.sol; do
    echo "|$p"
    echo "SOLDER_GATHERED_CHAIN=1|$p"
  done
} > "$out/runs.txt"
if [ "${RUNS:-all}" = cells ]; then grep -E '^\|examples/conv_chain.sol --dim' "$out/runs.txt" > "$out/runs.cells" && mv "$out/runs.cells" "$out/runs.txt"; fi

echo "== 1. compile ($(nproc) in parallel)"
{
  sed 's#^\([^|]*\)|\(.*\)$#env \1 '"$S"' bench --compile-only \2#' "$out/runs.txt"
  echo "$cells" | while IFS=: read -r tag dims; do echo "$S bench --compile-only examples/conv_chain.sol $dims"; done
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 2. verification through the CUDA backend"
: > "$out/verify.tsv"
while IFS='|' read -r envs args; do
  timeout 40 env $envs "$S" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  status=$(grep -E "^verified|FAILED|error" "$out/verify.log" | tail -n 1 | cut -c1-100)
  kernels=$(grep -o "fused, [0-9]* kernels\?" "$out/verify.log" | head -1)
  printf '%s\t%s\trc %s\t%s\t%s\n' "${envs:--}" "$args" "$rc" "$kernels" "$status" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$envs $args" | tr ' /=' '___' | cut -c1-80).log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 3. solder bench, $(left) s left"
: > "$out/solder.jsonl"
for variant in ${VARIANTS:-default SOLDER_GATHERED_CHAIN=0 SOLDER_PDL=0}; do
  echo "$cells" | while IFS=: read -r tag dims; do
    [ "$(left)" -lt 70 ] && { echo "   deadline: skipped $variant $tag"; continue; }
    envs=""; [ "$variant" != default ] && [ "$variant" != repeat ] && envs=$variant
    line=$(timeout 40 env $envs "$S" bench examples/conv_chain.sol $dims --json 2>>"$out/solder.err" | tail -n 1)
    echo "{\"variant\": \"$variant\", \"cell\": \"$tag\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
    echo "   $variant $tag: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
    r = json.loads(sys.stdin.read()); print("%.2f us, %s kernel(s)" % (r["median_us"], r.get("kernels")))
except Exception as e: print("failed", e)')"
  done
done

echo "== 4. peers (eager = cuDNN, torch.compile), $(left) s left"
timeout $(( $(left) > 30 ? $(left) - 15 : 15 )) python3 bench/peers.py --suite contractions --cases '^conv_chain-' --peers eager,compile \
  --compile-mode "${COMPILE_MODE:-max-autotune-no-cudagraphs}" --out "$out/peers.jsonl" > "$out/peers.txt" 2>&1
tail -n 9 "$out/peers.txt"

NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "${NCU:-1}" = 1 ] && [ -n "$NCU_BIN" ] && [ "$(left)" -gt 25 ]; then
  echo "== 5. ncu of the chained kernel at C5, $(left) s left"
  timeout $(( $(left) - 8 )) "$NCU_BIN" --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats -c 1 "$S" run --backend cuda examples/conv_chain.sol > "$out/ncu-c5.txt" 2>&1
  grep -E "^  [a-z_0-9]+_kernel|Duration|Registers Per|Achieved Occupancy|Active Warps Per|Grid Size|Dynamic Shared" "$out/ncu-c5.txt" | head -12
fi

echo "== 6. summary (µs, medians; $(( $(date +%s) - start )) s)"
python3 - "$out/solder.jsonl" "$out/peers.jsonl" <<'PY' | tee "$out/summary.txt"
import json, sys
solder, peers = {}, {}
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except Exception: continue
    if r.get("result"): solder[(r["variant"], r["cell"])] = r["result"]
try:
    for l in open(sys.argv[2]):
        r = json.loads(l)
        if r.get("record") == "peer" and r.get("median_us"): peers[(r["tag"], r["peer"])] = r["median_us"]
except FileNotFoundError: pass
variants = list(dict.fromkeys(v for v, _ in solder))
f = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else "-"
print(f"{'cell':5} " + " ".join(f"{v[:22]:>22}" for v in variants) + f" {'eager':>8} {'compile':>8} {'/compile':>9} {'/best':>7}")
for cell in ("C1", "C5", "C6", "C7"):
    e, c = peers.get((cell, "eager")), peers.get((cell, "compile"))
    d = solder.get(("default", cell), {})
    m = d.get("median_us")
    best = min([x for x in (e, c) if x]) if (e or c) else None
    cols = " ".join(f"{f(solder.get((v, cell), {}).get('median_us')) + ' (' + str(solder.get((v, cell), {}).get('kernels', '-')) + ')':>22}" for v in variants)
    print(f"{cell:5} {cols} {f(e):>8} {f(c):>8} {(f'{m / c:.2f}x' if m and c else '-'):>9} {(f'{m / best:.2f}x' if m and best else '-'):>7}")
PY
