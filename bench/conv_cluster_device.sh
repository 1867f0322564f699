#!/usr/bin/env bash
# One device call for conv_chain's chain across a thread-block cluster (issue 15, branch conv-cluster),
# run from a folder that holds a stripped `solder`, examples/, bench/*.py and tests/gpu/conv_gather/*.sol
# (the device gets /work/main's tree; the branch's files travel in .devcarry/conv-cluster):
#
#   bench/conv_cluster_device.sh OUTDIR [DEADLINE_S]
#
#   1. every kernel of the call compiled in parallel (`solder bench --compile-only`, one per core);
#   2. verified through `solder run --backend cuda` (float64 reference): C6 and C7 as planned (the
#      cluster form), conv_chain small, C1 and C5 with the cluster form forced (SOLDER_GATHERED_CHAIN=
#      cluster), C6 with clusters of 4, C1 and C5 as planned (one block per row tile), C6 and C7 as two
#      kernels (SOLDER_GATHERED_CHAIN=0);
#   3. `solder bench` of C1, C5, C6, C7: as planned, two kernels (=0), the cluster form forced (C1, C5),
#      clusters of 4 (C6), and the planned C6 / C7 again (the spread);
#   4. the peers in the same call (bench/peers.py: torch eager = cuDNN, torch.compile in its default
#      mode), CUDA-graph replays, median;
#   5. time permitting: tests/gpu/conv_gather's programs verified with the cluster form forced, then ncu
#      of the cluster kernel at C7 (one launch);
#   6. the summary table (last).
# Env: SOLDER_CUTLASS_INCLUDE (CuTe headers: without them `run` and `bench` switch every whole
# contraction off), SOLDER (the binary, default ./solder), COMPILE_MODE (default: default), NCU=0.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/conv_cluster_device.sh OUTDIR [DEADLINE_S]}
deadline=${2:-150}
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

C1="--dim KS=1 --dim OC1=256 --dim OC2=64"
C5="--dim KS=3 --dim OC1=64 --dim OC2=256"
C6="--dim IC=128 --dim HH=28 --dim WW=28 --dim OC1=128 --dim OC2=512"
C7="--dim IC=256 --dim HH=14 --dim WW=14 --dim OC1=256 --dim OC2=1024"
cell_dims() { case $1 in C1) echo "$C1";; C5) echo "$C5";; C6) echo "$C6";; C7) echo "$C7";; esac; }
# verification runs: ENV|ARGS (the first ones matter most)
{
  echo "|examples/conv_chain.sol $C6"
  echo "|examples/conv_chain.sol $C7"
  echo "SOLDER_GATHERED_CHAIN=cluster|examples/conv_chain.sol --small"
  echo "SOLDER_GATHERED_CHAIN=cluster|examples/conv_chain.sol $C5"
  echo "SOLDER_GATHERED_CHAIN=cluster|examples/conv_chain.sol $C1"
  echo "SOLDER_GATHERED_CHAIN_CLUSTER=4|examples/conv_chain.sol $C6"
  echo "|examples/conv_chain.sol $C1"
  echo "|examples/conv_chain.sol $C5"
  echo "SOLDER_GATHERED_CHAIN=0|examples/conv_chain.sol $C6"
  echo "SOLDER_GATHERED_CHAIN=0|examples/conv_chain.sol $C7"
} > "$out/runs.txt"
: > "$out/runs-late.txt"
for p in tests/gpu/conv_gather/*.sol; do echo "SOLDER_GATHERED_CHAIN=cluster|$p" >> "$out/runs-late.txt"; done
# bench runs: VARIANT|CELL (VARIANT: default, repeat, or env assignments)
cat > "$out/bench.txt" <<EOF
default|C6
default|C7
SOLDER_GATHERED_CHAIN=0|C6
SOLDER_GATHERED_CHAIN=0|C7
SOLDER_GATHERED_CHAIN_CLUSTER=4|C6
default|C1
default|C5
SOLDER_GATHERED_CHAIN=cluster|C1
SOLDER_GATHERED_CHAIN=cluster|C5
SOLDER_GATHERED_CHAIN=0|C1
SOLDER_GATHERED_CHAIN=0|C5
repeat|C6
repeat|C7
EOF

echo "== 1. compile ($(nproc) in parallel)"
{
  cat "$out/runs.txt" "$out/runs-late.txt" | sed 's#^\([^|]*\)|\(.*\)$#env \1 '"$S"' bench --compile-only \2#'
  while IFS='|' read -r v cell; do
    envs=""; [ "$v" != default ] && [ "$v" != repeat ] && envs=$v
    echo "env $envs $S bench --compile-only examples/conv_chain.sol $(cell_dims "$cell")"
  done < "$out/bench.txt"
} | sort -u | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

verify() {  # FILE
  while IFS='|' read -r envs args; do
    [ "$(left)" -lt 75 ] && { echo "   deadline: skipped $envs $args"; continue; }
    timeout 30 env $envs "$S" run --backend cuda $args > "$out/verify.log" 2>&1
    rc=$?
    status=$(grep -E "^verified|FAILED|error" "$out/verify.log" | tail -n 1 | cut -c1-100)
    kernels=$(grep -o "fused, [0-9]* kernels\?" "$out/verify.log" | head -1)
    printf '%s\t%s\trc %s\t%s\t%s\n' "${envs:--}" "$args" "$rc" "$kernels" "$status" | tee -a "$out/verify.tsv"
    [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$envs $args" | tr ' /=' '___' | cut -c1-60).log"
  done < "$1"
}
echo "== 2. verification through the CUDA backend"
: > "$out/verify.tsv"
verify "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 3. solder bench, $(left) s left"
: > "$out/solder.jsonl"
while IFS='|' read -r variant cell; do
  [ "$(left)" -lt 60 ] && { echo "   deadline: skipped $variant $cell"; continue; }
  envs=""; [ "$variant" != default ] && [ "$variant" != repeat ] && envs=$variant
  line=$(timeout 30 env $envs "$S" bench examples/conv_chain.sol $(cell_dims "$cell") --json 2>>"$out/solder.err" | tail -n 1)
  echo "{\"variant\": \"$variant\", \"cell\": \"$cell\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $variant $cell: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
    r = json.loads(sys.stdin.read()); print("%.2f us, %s kernel(s)" % (r["median_us"], r.get("kernels")))
except Exception as e: print("failed", e)')"
done < "$out/bench.txt"

echo "== 4. peers (eager = cuDNN, torch.compile ${COMPILE_MODE:-default}), $(left) s left"
timeout $(( $(left) > 30 ? $(left) - 12 : 18 )) python3 bench/peers.py --suite contractions --cases '^conv_chain-C' --peers eager,compile \
  --compile-mode "${COMPILE_MODE:-default}" --out "$out/peers.jsonl" > "$out/peers.txt" 2>&1
tail -n 9 "$out/peers.txt"

if [ "$(left)" -gt 30 ]; then
  echo "== 5a. tests/gpu/conv_gather with the cluster form forced, $(left) s left"
  verify "$out/runs-late.txt"
fi
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "${NCU:-1}" = 1 ] && [ -n "$NCU_BIN" ] && [ "$(left)" -gt 25 ]; then
  echo "== 5b. ncu of the cluster kernel at C7, $(left) s left"
  timeout $(( $(left) - 8 )) "$NCU_BIN" --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats -c 1 "$S" run --backend cuda examples/conv_chain.sol $C7 > "$out/ncu-c7.txt" 2>&1
  grep -E "^  [a-z_0-9]+_kernel|Duration|Registers Per|Achieved Occupancy|Active Warps Per|Grid Size|Cluster Size|Dynamic Shared" "$out/ncu-c7.txt" | head -12
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
short = {"default": "planned", "repeat": "planned again", "SOLDER_GATHERED_CHAIN=0": "two kernels",
         "SOLDER_GATHERED_CHAIN=cluster": "cluster forced", "SOLDER_GATHERED_CHAIN_CLUSTER=4": "cluster of 4"}
variants = list(dict.fromkeys(v for v, _ in solder))
f = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else "-"
print(f"{'cell':5} " + " ".join(f"{short.get(v, v)[:16]:>16}" for v in variants) + f" {'eager':>8} {'compile':>8} {'/compile':>9} {'/best':>7}")
for cell in ("C1", "C5", "C6", "C7"):
    e, c = peers.get((cell, "eager")), peers.get((cell, "compile"))
    m = solder.get(("default", cell), {}).get("median_us")
    best = min([x for x in (e, c) if x]) if (e or c) else None
    cols = " ".join(f"{(f(solder[(v, cell)].get('median_us')) + ' (' + str(solder[(v, cell)].get('kernels', '-')) + ')') if (v, cell) in solder else '-':>16}" for v in variants)
    print(f"{cell:5} {cols} {f(e):>8} {f(c):>8} {(f'{m / c:.2f}x' if m and c else '-'):>9} {(f'{m / best:.2f}x' if m and best else '-'):>7}")
PY
