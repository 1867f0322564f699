#!/usr/bin/env bash
# One device call for issue 15, branch quant-lrb3 (bench/NOTES.md, "quant-lrb3"): the last cells of the
# contractions issue against torch.compile (default mode) in the same call. Most important first, each
# part written under /tmp/qlrb3 and packed into $OUT/qlrb3.tgz as it finishes:
#   0. the GPU's clocks, power and throttle reasons every 100 ms (clocks.csv);
#   1. every NVRTC kernel of the call compiled in parallel (all of them in the carried cache);
#   2. `solder run --backend cuda` (float64 reference) of every variant the rounds time: linear_relu_backward
#      nerf on forced dw / dx tiles, quant_gemm Q8 / Q1 / Q4 / Q5 / two ragged M at fewer rows per
#      row-kernel block (SOLDER_ROW_TILE), Q7 / Q1 / Q2 with SOLDER_PDL=all; in parallel, while rounds.py
#      compiles the peers;
#   3. rounds.py (ROUNDS_PLAN=quant-lrb3): lrb nerf (two rounds) and Q8 (three), Solder's variants and
#      torch.compile interleaved; torch.profiler's listing of the peers' lrb and Q8 kernels (the peer's
#      parts inside its program); then one round of Solder's parts alone (bench/programs/lrb_*.sol), the
#      row kernels alone, Q5, Q7 / Q1 / Q2, and dw's 64 x 64 split-8 sweep, as far as the deadline allows;
#   4. ncu (--clock-control none, no cache flush) of Q8's row kernel at 8 and 2 rows per block, if time
#      is left;
#   5. the summary table (summary.txt), printed last.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, tree/ with this branch's device
# headers, examples/ and bench/ python files and programs, cache/):
#   cd .devcarry/quant-lrb3 && DEADLINE=104 bash device.sh
# bench/quant_lrb3/stage.sh builds the carry folder on the build machine.
set -uo pipefail
export ROUNDS_PLAN=quant-lrb3  # bench/quant_lrb/rounds.py's cells for this call
HERE=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" != --list-compile ] && [ -f "$HERE/payload.tgz" ] && tar xzf "$HERE/payload.tgz" -C "$HERE"  # solder, libgomp, tree/, cache/
R=${TREE:-$HERE/tree}
LRB=$R/examples/linear_relu_backward.sol
QG=$R/examples/quant_gemm.sol
DW=256,256,65536
DX=65536,256,256
# label | env | `solder run --backend cuda` arguments.
VERIFY="lrb.nerf||$LRB
lrb.nerf.dx_128x256c2x1|SOLDER_GEMM_TILE=128x256s4k1c2x1@$DX|$LRB
lrb.nerf.dx_128x256|SOLDER_GEMM_TILE=128x256s4k1@$DX|$LRB
lrb.nerf.dw_dx_c2x1|SOLDER_GEMM_TILE=64x64s9k8c2x1@$DW;128x256s4k1c2x1@$DX|$LRB
Q8||$QG --dim M=4096 --dim N=768 --dim K=2048
Q8.rows4|SOLDER_ROW_TILE=4|$QG --dim M=4096 --dim N=768 --dim K=2048
Q8.rows2|SOLDER_ROW_TILE=2|$QG --dim M=4096 --dim N=768 --dim K=2048
Q8.rows1|SOLDER_ROW_TILE=1|$QG --dim M=4096 --dim N=768 --dim K=2048
Q1.rows2|SOLDER_ROW_TILE=2|$QG --dim M=4096 --dim N=1536 --dim K=2560
Q4.rows2|SOLDER_ROW_TILE=2|$QG --dim M=4096 --dim N=8192 --dim K=3584
Q5.rows2|SOLDER_ROW_TILE=2|$QG --dim M=4096 --dim N=7168 --dim K=2048
quant.ragged.rows4|SOLDER_ROW_TILE=4|$QG --dim M=4001 --dim N=264 --dim K=2048
quant.ragged.rows1|SOLDER_ROW_TILE=1|$QG --dim M=1003 --dim N=264 --dim K=2048
Q7.pdl_all|SOLDER_PDL=all|$QG --dim M=4096 --dim N=2048 --dim K=768
Q1.pdl_all|SOLDER_PDL=all|$QG --dim M=4096 --dim N=1536 --dim K=2560
Q2.pdl_all|SOLDER_PDL=all|$QG --dim M=4096 --dim N=2560 --dim K=1536"
# sh -c command lines: each ENV word quoted (SOLDER_GEMM_TILE's entries are ';'-separated).
quoted() { local w; for w in $1; do printf '%q ' "$w"; done; }
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $(quoted "$env")timeout 100 $1 bench $args --compile-only"; done
  python3 "$HERE/rounds.py" --list "$R" | while IFS='|' read -r env args; do echo "env $(quoted "$env")timeout 100 $1 bench $args --compile-only"; done
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

O=${OUT:-/tmp/out}; out=/tmp/qlrb3; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); DEADLINE=${DEADLINE:-104}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf "$O/qlrb3.tgz" -C /tmp qlrb3 2>/dev/null; }
cd "$HERE" && chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$HERE:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$HERE/cache SOLDER_SOURCE_DIR=$HERE/tree
# The CuTe headers through one fixed path, the one stage.sh compiled the carried cache with (the include
# path is part of the cache key).
ln -sfn "$(cd "${SOLDER_CUTLASS_INCLUDE:-$HERE/../cutlass}" && pwd)" /tmp/solder-qlrb3-cutlass
export SOLDER_CUTLASS_INCLUDE=/tmp/solder-qlrb3-cutlass SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$HERE/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m); start $(date -u +%FT%TZ)" | tee -a "$out/device.txt"

echo "== 0. clock log (100 ms)"
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 || fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
clock_pid=$!

echo "== 1. compile (NVRTC, in parallel; all in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 25 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 2. verify: solder run --backend cuda against float64; peers compile meanwhile ($(left) s left)"
rm -f /tmp/qlrb3-go
PYTHONUNBUFFERED=1 python3 "$HERE/rounds.py" --solder "$S" --tree "$R" --out "$out" --go /tmp/qlrb3-go \
  --deadline $(( start + DEADLINE - 12 )) --compile-by $(( start + 50 )) \
  > "$out/rounds.txt" 2>&1 &
rounds_pid=$!
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 30 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
timeout 34 xargs -d '\n' -P 8 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt"
sort "$out/verify.txt" | sed 's/^/   /'
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") ($(left) s left)"
pack
touch /tmp/qlrb3-go

echo "== 3. rounds: Solder and torch.compile interleaved ($(left) s left)"
while kill -0 "$rounds_pid" 2>/dev/null && [ "$(left)" -gt 10 ]; do sleep 1; done
kill "$rounds_pid" 2>/dev/null
grep -E "^(peer|kernels|torch part)" "$out/rounds.txt" | sed 's/^/   /' | cut -c1-220
pack

echo "== 4. ncu of Q8's row kernel at 8 and 2 rows per block, if time is left ($(left) s left)"
NCU_METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers
for job in "row-rows8|" "row-rows2|SOLDER_ROW_TILE=2"; do
  IFS='|' read -r label env <<< "$job"
  [ "$(left)" -gt 8 ] || { echo "   deadline: ncu $label skipped"; continue; }
  env $env timeout $(( $(left) - 4 )) ncu --clock-control none --cache-control none --launch-skip 2 --launch-count 3 \
    --metrics $NCU_METRICS --csv --page raw --print-units base "$S" bench "$R/bench/programs/quant_rows.sol" --replays 2 \
    --calls-per-replay 1 > "$out/ncu-$label.csv" 2> "$out/ncu-$label.err"
  echo "   ncu $label rc $? ($(left) s left)"
done
kill "$clock_pid" 2>/dev/null

echo "== 5. summary ($(left) s left)"
python3 "$HERE/summary.py" "$out" quant-lrb3 > "$out/summary.txt" 2>&1
pack
cat "$out/summary.txt"
