#!/usr/bin/env bash
# One device call for issue 15, branch lrb-model (bench/NOTES.md, "lrb-model"): the GEMM cost model's
# split-K merge priced on every partial (the kMergeSplitsInFlight bound removed), measured on what it
# moves — linear_relu_backward nerf's dw, 128x64 s6 k16 → 64x64 s9 k8 — against the other 64 x 64
# split-8 forms and torch.compile (default mode) in the same call. Most important first, each part
# written under /tmp/lrbm and packed into $OUT/lrbm.tgz as it finishes:
#   0. the GPU's clocks, power and throttle reasons every 100 ms (clocks.csv);
#   1. every NVRTC kernel of the call compiled in parallel (all of them in the carried cache);
#   2. `solder run --backend cuda` (float64 reference) of linear_relu_backward small / nerf / wide /
#      N 4001 and nerf with each forced dw tile, in parallel, while rounds.py compiles the peers;
#   3. rounds.py: two interleaved rounds of Solder's variants and torch.compile (nerf: the planner's dw
#      and four forced ones; wide), then torch.profiler's listing of the peer's nerf kernels;
#   4. ncu (--clock-control none, no cache flush) of dw on the planner's tile and on the old one, if
#      time is left;
#   5. the summary table (summary.txt), printed last.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, tree/device, cache/), inside the
# device's tree (examples/ and bench/ are read from the tree two levels up):
#   cd .devcarry/lrb-model && DEADLINE=100 bash device.sh
# bench/lrb_model/stage.sh builds the carry folder on the build machine.
set -uo pipefail
export ROUNDS_PLAN=lrb-model  # bench/quant_lrb/rounds.py's cells for this call
R=${TREE:-../..}
HERE=$(cd "$(dirname "$0")" && pwd)
LRB=$R/examples/linear_relu_backward.sol
DW=256,256,65536
# label | env | `solder run --backend cuda` arguments.
VERIFY="nerf||$LRB
nerf.dw_128x64s6k16|SOLDER_GEMM_TILE=128x64s6k16@$DW|$LRB
nerf.dw_64x64s14k8|SOLDER_GEMM_TILE=64x64s14k8@$DW|$LRB
nerf.dw_64x64s9k8c2x1|SOLDER_GEMM_TILE=64x64s9k8c2x1@$DW|$LRB
nerf.dw_64x64s14k8c2x1|SOLDER_GEMM_TILE=64x64s14k8c2x1@$DW|$LRB
wide||$LRB --dim N=16384 --dim CI=1024 --dim CO=1024
ragged||$LRB --dim N=4001
small||$LRB --small"
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
  python3 "$HERE/rounds.py" --list "$R" | while IFS='|' read -r env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

O=${OUT:-/tmp/out}; out=/tmp/lrbm; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); DEADLINE=${DEADLINE:-100}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf "$O/lrbm.tgz" -C /tmp lrbm 2>/dev/null; }
[ -f payload.tgz ] && tar xzf payload.tgz  # stage.sh: solder, libgomp, tree/, cache/
chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
# The CuTe headers through one fixed path, the one stage.sh compiled the carried cache with (the include
# path is part of the cache key).
ln -sfn "$(cd "${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass}" && pwd)" /tmp/solder-lrbm-cutlass
export SOLDER_CUTLASS_INCLUDE=/tmp/solder-lrbm-cutlass SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m); start $(date -u +%FT%TZ)" | tee -a "$out/device.txt"

echo "== 0. clock log (100 ms)"
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 || fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
clock_pid=$!

echo "== 1. compile (NVRTC, in parallel; all in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 30 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"
echo "   the planner's dw: $("$S" plan "$LRB" 2>&1 | grep -A0 'chosen' | tail -n 1)" | tee -a "$out/device.txt"

echo "== 2. verify: solder run --backend cuda against float64; peers compile meanwhile ($(left) s left)"
rm -f /tmp/lrbm-go
PYTHONUNBUFFERED=1 python3 "$HERE/rounds.py" --solder "$S" --tree "$R" --out "$out" --go /tmp/lrbm-go \
  --deadline $(( start + DEADLINE - 14 )) --compile-by $(( start + 55 )) > "$out/rounds.txt" 2>&1 &
rounds_pid=$!
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 40 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
timeout 45 xargs -d '\n' -P 8 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt"
sort "$out/verify.txt" | sed 's/^/   /'
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") ($(left) s left)"
pack
touch /tmp/lrbm-go

echo "== 3. rounds: Solder and torch.compile interleaved ($(left) s left)"
while kill -0 "$rounds_pid" 2>/dev/null && [ "$(left)" -gt 8 ]; do sleep 1; done
kill "$rounds_pid" 2>/dev/null
grep -E "^(peer|kernels)" "$out/rounds.txt" | sed 's/^/   /' | cut -c1-220
pack

echo "== 4. ncu of dw, if time is left ($(left) s left)"
NCU_METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed
for job in "dw-default|" "dw-128x64s6k16|SOLDER_GEMM_TILE=128x64s6k16@$DW"; do
  IFS='|' read -r label env <<< "$job"
  [ "$(left)" -gt 12 ] || { echo "   deadline: ncu $label skipped"; continue; }
  env $env timeout $(( $(left) - 6 )) ncu --clock-control none --cache-control none -k regex:dw_kernel --launch-skip 2 \
    --launch-count 3 --metrics $NCU_METRICS --csv --page raw --print-units base "$S" bench $LRB --replays 2 --calls-per-replay 1 \
    > "$out/ncu-$label.csv" 2> "$out/ncu-$label.err"
  echo "   ncu $label rc $? ($(left) s left)"
done
kill "$clock_pid" 2>/dev/null

echo "== 5. summary ($(left) s left)"
python3 "$HERE/summary.py" "$out" lrb-model > "$out/summary.txt" 2>&1
pack
cat "$out/summary.txt"
