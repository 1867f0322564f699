#!/usr/bin/env bash
# The device call of gemm-chains3 (issue 15: ffn / gated_ffn per-kernel gap to cuBLAS), all in one call:
# the skeleton's device test (programmatic dependent launch chains included) beside the compile cache,
# a few end-to-end verifications, Solder's 36 gemm_chains cases FIRST (per call, as many calls per graph
# replay as the peers get, programmatic dependent launch on), two A/B runs on 12 cases (PDL off; the
# old method: one round of input copies per replay, PDL off = the earlier sessions' measurement), a tile
# sweep at the suite's exact product shapes (bench/gemm/skinny.sol) and whole cases with one product's
# tile forced (SOLDER_GEMM_TILE=TILE@M,N,K), the peers (bench/peers.py, torch.compile default mode),
# then Nsight Compute per kernel of Solder and of the peers (name, grid, time) for a few cells.
#
#   bench/gemm_chains3.sh OUTDIR CARRY_DIR
#
# CARRY_DIR holds a stripped `solder`, `test_sm90_gemm` and libgomp.so.1. Env: SOLDER_CUTLASS_INCLUDE,
# SOLDER_COMMIT, PEERS_LIMIT (seconds, default 100), NCU_CASES (suite ids, default below).
set -uo pipefail
cd "${SOLDER_ROOT:-$(dirname "$0")/..}"
out=${1:?usage: bench/gemm_chains3.sh OUTDIR CARRY_DIR}
carry=${2:?usage: bench/gemm_chains3.sh OUTDIR CARRY_DIR}
mkdir -p "$out" build
cp "$carry/solder" build/solder
# A checkout without this branch's scripts (the device call sends the integrator's tree): take them
# from the carry folder.
[ -f bench/peer_kernels.py ] || cp "$carry/peer_kernels.py" bench/peer_kernels.py
chmod +x build/solder "$carry/test_sm90_gemm"
export SOLDER_CACHE_DIR=$PWD/build/kernel-cache
export LD_LIBRARY_PATH=$PWD/$carry:${LD_LIBRARY_PATH:-}
start=$(date +%s)
el() { echo "$(( $(date +%s) - start )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

# Every gemm_chains case: "id workload dims..." (bench/suites.py).
python3 - > "$out/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "gemm_chains":
        print(c.id, c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
AB_CASES="ffn-S1 ffn-S3 ffn-S8 ffn-G2 ffn-G4 ffn-G5 gated_ffn-S1 gated_ffn-S8 gated_ffn-G2 gated_ffn-G4"

# The sweep: skinny.sol (one product h[M,K]·d[K,N], B N-major, f16) at the suite's product shapes.
# 'dims|tiles' ('model' = the cost model's choice).
SWEEP=(
  "--dim N=3072 --dim K=8192|model 128x64s6k2 64x192s6k4 128x192s5k8 64x128s8k2"
  "--dim N=1024 --dim K=3072|model 64x64s8k2 64x64s8k4 128x64s6k4 64x128s8k8"
  "--dim N=768 --dim K=3072|model 64x64s8k4 64x64s8k3 128x64s6k8"
  "--dim N=3072 --dim K=1024|model 64x192s6k4 128x64s6k2"
  "--dim N=2048 --dim K=8192|model 64x64s8k2 64x128s8k4"
  "--dim N=256 --dim K=512|model 64x64s8k2"
  "--dim N=64 --dim K=256|model 64x64s8k4"
  "--dim N=512 --dim K=2048|model 64x64s8k4 64x64s8k8"
  "--dim N=384 --dim K=1536|model 64x64s8k4"
  "--dim N=768 --dim K=768|model 64x64s8k2"
)
# Whole cases with one product's tile forced: 'case|SOLDER_GEMM_TILE'.
FORCED=(
  "ffn-S8|64x64s8k4@128,1024,3072"
  "ffn-S8|64x64s8k2@128,1024,3072"
  "ffn-G4|64x64s8k4@128,768,3072"
  "ffn-S1|64x192s6k4@128,3072,8192"
  "ffn-S4|64x64s8k2@128,2048,8192"
  "ffn-G2|64x64s8k2@128,256,512"
  "ffn-G9|64x64s8k4@128,512,2048"
  "gated_ffn-S8|64x64s8k4@128,1024,3072"
  "gated_ffn-G4|64x64s8k4@128,768,3072"
)
dims_of() { awk -v id="$1" '$1 == id { $1 = ""; print }' "$out/cases.txt"; }

echo "== 0. compile cache (in parallel) beside 1. the device test"
{
  while read -r id wl dims; do echo "build/solder bench examples/$wl.sol $dims --compile-only"; done < "$out/cases.txt"
  for spec in "${SWEEP[@]}"; do
    IFS='|' read -r dims tiles <<< "$spec"
    for t in $tiles; do
      if [ "$t" = model ]; then echo "build/solder bench bench/gemm/skinny.sol $dims --compile-only"
      else echo "SOLDER_GEMM_TILE=$t build/solder bench bench/gemm/skinny.sol $dims --compile-only"; fi
    done
  done
  for spec in "${FORCED[@]}"; do
    IFS='|' read -r id tile <<< "$spec"
    read -r wl dims < <(dims_of "$id")
    echo "SOLDER_GEMM_TILE='$tile' build/solder bench examples/$wl.sol $dims --compile-only"
  done
} > "$out/compile-commands.txt"
(xargs -d '\n' -P 14 -n 1 sh -c < "$out/compile-commands.txt" > "$out/compile.log" 2>&1; echo done > "$out/compile.done") &
timeout 150 "$carry/test_sm90_gemm" 2026 > "$out/gemm-test.log" 2>&1
echo "   device test: rc=$? $(grep -c '^PASS' "$out/gemm-test.log") PASS, $(grep -c '^FAIL' "$out/gemm-test.log") FAIL; $(tail -n 1 "$out/gemm-test.log")"
grep '^FAIL' "$out/gemm-test.log" | head -5
grep 'pdl' "$out/gemm-test.log" | head -9
while [ ! -f "$out/compile.done" ]; do sleep 1; done
echo "   compile errors: $(grep -ci error "$out/compile.log"); $(el)"

echo "== 2. verified end to end (solder run --backend cuda, in parallel)"
VERIFY=(
  "|examples/ffn.sol"
  "|examples/ffn.sol --small"
  "|examples/ffn.sol --dim M=200 --dim N=360 --dim K=40 --dim L=100"
  "|examples/gated_ffn.sol --dim N=3072 --dim K=1024 --dim L=1024"
  "|examples/gated_ffn.sol --small"
  "SOLDER_GEMM_TILE=64x64s8k4@128,1024,3072|examples/ffn.sol --dim N=3072 --dim K=1024 --dim L=1024"
  "SOLDER_GEMM_TILE=64x192s6k4@128,3072,8192|examples/ffn.sol"
  "SOLDER_GEMM_TILE=64x64s8k2@200,360,1000|examples/ffn.sol --dim M=200 --dim N=1000 --dim K=520 --dim L=360"
  "|examples/ffn.sol --dim M=200 --dim N=1000 --dim K=520 --dim L=360"
  "SOLDER_PDL=0|examples/ffn.sol --dim N=3072 --dim K=1024 --dim L=1024"
)
: > "$out/verify.tsv"
for spec in "${VERIFY[@]}"; do
  IFS='|' read -r env args <<< "$spec"
  ( r=$(env $env timeout 150 build/solder run --backend cuda $args 2>&1 | tail -n 1); printf '%s\t%s\t%s\n' "${env:-default}" "$args" "$r" >> "$out/verify.tsv" ) &
done
wait
cat "$out/verify.tsv"
echo "   $(el)"

bench_case() {  # $1 case id, $2 output jsonl, then env assignments and extra flags via BENCH_ENV / BENCH_FLAGS
  local id=$1 file=$2 wl dims line
  read -r wl dims < <(dims_of "$id")
  line=$(env ${BENCH_ENV:-} timeout 60 build/solder bench "examples/$wl.sol" $dims ${BENCH_FLAGS:-} --json 2>>"$out/bench.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"env\": \"${BENCH_ENV:-}\", \"flags\": \"${BENCH_FLAGS:-}\", \"result\": ${line:-null}}" >> "$file"
  printf '%-14s %-40s %s\n' "$id" "${BENCH_ENV:-} ${BENCH_FLAGS:-}" "$(echo "$line" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.2f us  (%d calls/replay, %d sets)" % (r["median_us"], r.get("calls_per_replay", 0), r["input_sets"]))
except Exception as e: print("failed", e)')"
}

echo "== 3. Solder, all 36 (default: calls per replay as the peers, PDL on)"
: > "$out/solder.jsonl"
while read -r id wl dims; do bench_case "$id" "$out/solder.jsonl"; done < "$out/cases.txt"
echo "   $(el)"

echo "== 4. A/B on 10 cases: PDL off; the old method (PDL off, one round of input copies per replay)"
: > "$out/solder-ab.jsonl"
for id in $AB_CASES; do
  BENCH_ENV="SOLDER_PDL=0" bench_case "$id" "$out/solder-ab.jsonl"
  BENCH_ENV="SOLDER_PDL=0" BENCH_FLAGS="--calls-per-replay 1" bench_case "$id" "$out/solder-ab.jsonl"
done
echo "   $(el)"

echo "== 5. tile sweep (skinny.sol) and whole cases with one product forced"
: > "$out/sweep.tsv"
for spec in "${SWEEP[@]}"; do
  IFS='|' read -r dims tiles <<< "$spec"
  for t in $tiles; do
    e=""; [ "$t" != model ] && e="SOLDER_GEMM_TILE=$t"
    line=$(env $e timeout 60 build/solder bench bench/gemm/skinny.sol $dims --json 2>>"$out/sweep.err" | tail -n 1)
    us=$(echo "$line" | python3 -c 'import json,sys
try: print("%.2f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")')
    printf 'skinny\t%s\t%s\t%s\n' "$dims" "$t" "$us" | tee -a "$out/sweep.tsv"
  done
done
: > "$out/solder-forced.jsonl"
for spec in "${FORCED[@]}"; do
  IFS='|' read -r id tile <<< "$spec"
  BENCH_ENV="SOLDER_GEMM_TILE=$tile" bench_case "$id" "$out/solder-forced.jsonl"
done
echo "   $(el)"

echo "== 6. peers (same call): torch eager and torch.compile (default mode)"
timeout $(( ${PEERS_LIMIT:-100} + 60 )) python3 bench/peers.py --suite gemm_chains --peers eager,compile --compile-mode default \
  --out "$out/peers.jsonl" --time-limit "${PEERS_LIMIT:-100}" --no-ceilings > "$out/peers.log" 2>&1
echo "   rc=$? $(grep -c . "$out/peers.jsonl") records; $(el)"
tail -n 3 "$out/peers.log"

echo "== 7. Nsight Compute per kernel: Solder (solder bench, one call per replay) and the peers (bench/peer_kernels.py)"
metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
mkdir -p "$out/ncu"
for id in ${NCU_CASES:-ffn-S1 ffn-S8 ffn-G2}; do
  [ $(( $(date +%s) - start )) -gt "${NCU_UNTIL:-290}" ] && { echo "   (no time left for ncu of $id)"; continue; }
  read -r wl dims < <(dims_of "$id")
  timeout 45 ncu --clock-control none --metrics "$metrics" --csv --print-units base --launch-skip 4 --launch-count 6 \
    build/solder bench "examples/$wl.sol" $dims --replays 3 --calls-per-replay 1 > "$out/ncu/solder-$id.csv" 2> "$out/ncu/solder-$id.err"
  echo "   solder $id rc=$? $(el)"
  set -- $(echo "$dims" | sed 's/--dim [A-Z]*=//g')
  [ "$id" = ffn-G2 ] && continue  # Solder's kernels only: the peers' fixed costs show in the peers' times
  timeout 60 ncu --clock-control none --metrics "$metrics" --csv --print-units base --nvtx --nvtx-include 'peer_kernels/' \
    python3 bench/peer_kernels.py "$wl" "$@" --calls 2 --no-profiler > "$out/ncu/peers-$id.csv" 2> "$out/ncu/peers-$id.err"
  echo "   peers $id rc=$? $(el)"
done
python3 - "$out/ncu" <<'PY' | tee "$out/ncu-summary.txt"
import csv, glob, os, statistics, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    rows = [r for r in csv.reader(open(f)) if len(r) > 10]
    if len(rows) < 2: print(os.path.basename(f), "no kernels"); continue
    head = rows[0]; data = [dict(zip(head, r)) for r in rows[1:] if r[0] != ""]
    per = {}
    for d in data:
        name = d.get("Kernel Name", "?")
        m, v = d.get("Metric Name"), d.get("Metric Value", "").replace(",", "")
        key = (d.get("ID"), name)
        per.setdefault(key, {})[m] = v
    byname = {}
    for (i, name), ms in per.items():
        byname.setdefault(name, []).append(ms)
    print("==", os.path.basename(f))
    for name, lst in byname.items():
        def med(m):
            xs = [float(x[m]) for x in lst if x.get(m) not in (None, "")]
            return statistics.median(xs) if xs else float("nan")
        print(f"   {med('gpu__time_duration.sum') / 1000:8.2f} us  grid {med('launch__grid_size'):6.0f}  block {med('launch__block_size'):4.0f}"
              f"  dram {med('dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%  tensor {med('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):5.1f}%"
              f"  x{len(lst)}  {name[:110]}")
PY
echo "== total $(el)"
