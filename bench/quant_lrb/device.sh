#!/usr/bin/env bash
# One device call for issue 15, branch quant-lrb (bench/NOTES.md, "quant-lrb"): the last cells of the
# contractions issue against torch.compile (default mode) in the same call. Most important first, each
# part written under /tmp/qlrb and packed into $OUT/qlrb.tgz as it finishes:
#   0. the GPU's clocks, power and throttle reasons every 100 ms for the whole call (clocks.csv): what
#      the bimodal medians of Q3 / Q5 / Q6 / L2 go with;
#   1. every NVRTC kernel of the call compiled in parallel (most come from the carried cache);
#   2. `solder run --backend cuda` (float64 reference) of quant_gemm Q1-Q10, ragged, small, rmsnorm_gemm
#      L1 / L2, linear_relu_backward nerf / wide, and the variants the rounds time (two row blocks per
#      SM, dw's forced tiles), in parallel, while rounds.py compiles the peers;
#   3. rounds.py: interleaved rounds of Solder's variants and torch.compile per cell (Q8: the row
#      kernel's early launch of the GEMM, on and off, and two row blocks per SM; Q3 / Q5 / Q6 / L2
#      three rounds; linear_relu_backward's dw on four tiles), then torch.profiler listings of the
#      peers' kernels (cuBLAS's dw kernel with its grid);
#   4. ncu (--clock-control none, no cache flush): dw's kernel on its default tile and with each
#      cluster (L2 and DRAM bytes), Q5's two kernels per launch with the SM clock (if time is left);
#   5. the summary table (summary.txt), printed last.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, tree/device, cache/), inside the
# device's tree (examples/ and bench/ are read from the tree two levels up):
#   cd .devcarry/quant-lrb && DEADLINE=150 bash device.sh
# bench/quant_lrb/stage.sh builds the carry folder on the build machine.
set -uo pipefail
R=${TREE:-../..}
HERE=$(cd "$(dirname "$0")" && pwd)
QG=$R/examples/quant_gemm.sol
RG=$R/examples/rmsnorm_gemm.sol
LRB=$R/examples/linear_relu_backward.sol
DW=256,256,65536
# label | env | `solder run --backend cuda` arguments.
VERIFY="Q8||$QG --dim M=4096 --dim N=768 --dim K=2048
Q8.no_trigger|SOLDER_ROW_LAUNCH_DEPENDENTS=0|$QG --dim M=4096 --dim N=768 --dim K=2048
Q8.bps2|SOLDER_ROW_BLOCKS_PER_SM=2|$QG --dim M=4096 --dim N=768 --dim K=2048
lrb.nerf||$LRB
lrb.nerf.dw_c1x2|SOLDER_GEMM_TILE=128x64s6k16c1x2@$DW|$LRB
lrb.nerf.dw_c2x1|SOLDER_GEMM_TILE=128x64s6k16c2x1@$DW|$LRB
lrb.nerf.dw_64x64k8c2x1|SOLDER_GEMM_TILE=64x64s14k8c2x1@$DW|$LRB
lrb.wide||$LRB --dim N=16384 --dim CI=1024 --dim CO=1024
lrb.ragged||$LRB --dim N=4001
Q1||$QG --dim M=4096 --dim N=1536 --dim K=2560
Q2||$QG --dim M=4096 --dim N=2560 --dim K=1536
Q3||$QG --dim M=4096 --dim N=3584 --dim K=8192
Q4||$QG --dim M=4096 --dim N=8192 --dim K=3584
Q5||$QG --dim M=4096 --dim N=7168 --dim K=2048
Q6||$QG --dim M=4096 --dim N=2048 --dim K=7168
Q7||$QG --dim M=4096 --dim N=2048 --dim K=768
Q7.pdl_all|SOLDER_PDL=all|$QG --dim M=4096 --dim N=2048 --dim K=768
Q9||$QG --dim M=4096 --dim N=4096 --dim K=1536
Q10||$QG --dim M=4096 --dim N=1536 --dim K=4096
quant.ragged||$QG --dim M=1003 --dim N=264 --dim K=2048
quant.small||$QG --small
Q2.bps2|SOLDER_ROW_BLOCKS_PER_SM=2|$QG --dim M=4096 --dim N=2560 --dim K=1536
Q4.bps2|SOLDER_ROW_BLOCKS_PER_SM=2|$QG --dim M=4096 --dim N=8192 --dim K=3584
L1||$RG
L1.bps2|SOLDER_ROW_BLOCKS_PER_SM=2|$RG
L2||$RG --dim T=4096 --dim HID=4096 --dim N=14336"
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
  python3 "$HERE/rounds.py" --list "$R" | while IFS='|' read -r env args; do echo "env $env timeout 100 $1 bench $args --compile-only"; done
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

O=${OUT:-/tmp/out}; out=/tmp/qlrb; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); DEADLINE=${DEADLINE:-150}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf "$O/qlrb.tgz" -C /tmp qlrb 2>/dev/null; }
[ -f payload.tgz ] && tar xzf payload.tgz  # stage.sh: solder, libgomp, tree/, cache/
chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$PWD/cache SOLDER_SOURCE_DIR=$PWD/tree
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$PWD/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m); start $(date -u +%FT%TZ)" | tee -a "$out/device.txt"

echo "== 0. clock log (100 ms)"
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 || fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
clock_pid=$!

echo "== 1. compile (NVRTC, in parallel; most are in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 40 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 2. verify: solder run --backend cuda against float64; peers compile meanwhile ($(left) s left)"
rm -f /tmp/qlrb-go
PYTHONUNBUFFERED=1 python3 "$HERE/rounds.py" --solder "$S" --tree "$R" --out "$out" --go /tmp/qlrb-go \
  --deadline $(( start + DEADLINE - 16 )) --compile-by $(( start + 62 )) > "$out/rounds.txt" 2>&1 &
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
timeout 50 xargs -d '\n' -P 8 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt"
sort "$out/verify.txt" | sed 's/^/   /'
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") ($(left) s left)"
pack

echo "== 3. ncu while the peers compile: dw on its tile, A multicast, B multicast; Q5's two kernels ($(left) s left)"
NCU_METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,launch__grid_size,dram__throughput.avg.pct_of_peak_sustained_elapsed
# label | env | kernel filter and launches | solder bench arguments (--clock-control none, no cache flush)
NCU_JOBS="dw-default||-k regex:dw_kernel --launch-skip 2 --launch-count 3|$LRB --replays 2 --calls-per-replay 1
Q5||--launch-skip 4 --launch-count 16|$QG --dim M=4096 --dim N=7168 --dim K=2048 --replays 3 --calls-per-replay 4
dw-c1x2|SOLDER_GEMM_TILE=128x64s6k16c1x2@$DW|-k regex:dw_kernel --launch-skip 2 --launch-count 3|$LRB --replays 2 --calls-per-replay 1
dw-c2x1|SOLDER_GEMM_TILE=128x64s6k16c2x1@$DW|-k regex:dw_kernel --launch-skip 2 --launch-count 3|$LRB --replays 2 --calls-per-replay 1"
ncu_job() {  # one line of NCU_JOBS, at most $2 seconds
  local label env filter args
  IFS='|' read -r label env filter args <<< "$1"
  env $env timeout "$2" ncu --clock-control none --cache-control none $filter --metrics $NCU_METRICS --csv --page raw \
    --print-units base "$S" bench $args > "$out/ncu-$label.csv" 2> "$out/ncu-$label.err"
  echo "   ncu $label rc $? ($(left) s left)"
}
ncu_done=""
if command -v ncu > /dev/null; then
  while IFS= read -r job; do
    [ $(( start + 70 - $(date +%s) )) -gt 6 ] || break
    ncu_job "$job" 15; ncu_done="$ncu_done ${job%%|*}"
  done <<< "$NCU_JOBS"
fi
touch /tmp/qlrb-go

echo "== 4. rounds: Solder and torch.compile interleaved ($(left) s left)"
while kill -0 "$rounds_pid" 2>/dev/null && [ "$(left)" -gt 8 ]; do sleep 1; done
kill "$rounds_pid" 2>/dev/null
grep -E "^(peer|kernels)" "$out/rounds.txt" | sed 's/^/   /' | cut -c1-220
pack

echo "== 5. ncu, if time is left: the jobs the window before the rounds did not reach ($(left) s left)"
if command -v ncu > /dev/null; then
  while IFS= read -r job; do
    case " $ncu_done " in *" ${job%%|*} "*) continue ;; esac
    [ "$(left)" -gt 10 ] || { echo "   deadline: ncu ${job%%|*} skipped"; continue; }
    ncu_job "$job" $(( $(left) - 5 ))
  done <<< "$NCU_JOBS"
fi
kill "$clock_pid" 2>/dev/null

echo "== 6. summary ($(left) s left)"
python3 "$HERE/summary.py" "$out" > "$out/summary.txt" 2>&1
pack
cat "$out/summary.txt"
