#!/usr/bin/env bash
# suite15's device call (issue 15, eighteenth session): where every target of issue 15 stands on this device,
# main's kernels against the peers of the same call, one round, the cells in the order of the targets'
# weight so that a cut loses the tail. Runs from the mini root bench/suite15/stage.sh stages (CuTe headers in
# ../cutlass, the call's kernels compiled ahead into kernels.tar.xz, so the device compiles nothing):
#   cd .devcarry/suite15 && DEADLINE=190 bash bench/suite15/call.sh        (DRY_RUN=1: the commands, no GPU)
#   1. bench/merged_call.sh with bench/suite15/suite15.spots (no device tests, no run.sh): `solder bench` of
#      gemm_chains S1-S8 / G1-G10 (ffn, gated_ffn), moe_routing R1-R8, quant_gemm Q1-Q10, rmsnorm_gemm
#      L1-L2, linear_relu_backward, nerf_mlp and conv_chain C1/C5/C6/C7, then their peers (eager, torch.compile
#      default mode), the SM clock logged through the steps; into $OUT/mc1/r.tgz;
#   2. the GEMM skeleton alone at 8192^3: `solder bench` of bench/programs/bf16_rowscale_gemm.sol and
#      fp8_rowscale_gemm.sol, then bench/suite15/skeleton_peers.py (this device's ceilings, cuBLAS bf16,
#      torch._scaled_mm e4m3 row-wise and tensor-wise) with its own clock log; into $OUT/a-skeleton.tgz;
#   3. bench/merged_call.sh with bench/suite15/evoformer.spots: evoformer's four cells against FlexAttention
#      (max-autotune mode) and cuDNN SDPA, under what is left of DEADLINE; into $OUT/b-evoformer.tgz (mc2/r).
# $OUT keeps few files (the device tool returns 8, in path order): a-skeleton.tgz, b-evoformer.tgz, call.log,
# mc1/r.tgz (mc2/r.tgz while phase 3 runs). Unpack them as DIR/skeleton, DIR/mc2/r and DIR/mc1/r:
# bench/suite15/table.py DIR prints the table.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
DRY=${DRY_RUN:-0}
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export SOLDER_COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD)
start=$(date +%s); DEADLINE=${DEADLINE:-190}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
[ "$DRY" = 1 ] || exec > >(tee -a "$O/call.log") 2>&1
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
PEER_ARGS="--compile-mode default --reps 50"   # 50 timed replays, as `solder bench`

stamp "== 0. $(date -u +%FT%TZ) commit $SOLDER_COMMIT $([ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
if [ "$DRY" != 1 ]; then
  bash bench/unpack_staged.sh
  [ -f kernels.tar.xz ] && python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    stamp "   $(ls .cache/kernels | wc -l) cached kernels unpacked"
fi

stamp "== 1. the suites' cells and their peers ($(left) s left)"
OUT=$O/mc1 DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=1 PEER_ARGS="$PEER_ARGS" DEADLINE=$(( $(left) - 5 )) \
  SPOTS=bench/suite15/suite15.spots bash bench/merged_call.sh
# only r.tgz stays: the loose files would take the device tool's 8 places before the later phases' files
[ "$DRY" = 1 ] || rm -rf "$O/mc1/r" "$O/mc1/run.tgz"

stamp "== 2. the GEMM skeleton alone, 8192^3 ($(left) s left)"
SKEL=(
  "build/solder bench bench/programs/bf16_rowscale_gemm.sol --dim T=8192 --dim HID=8192 --dim N=8192 --json"
  "build/solder bench bench/programs/fp8_rowscale_gemm.sol --dim M=8192 --dim N=8192 --dim K=8192 --json"
)
if [ "$DRY" = 1 ]; then
  printf '   %s\n' "${SKEL[@]}" "python3 bench/suite15/skeleton_peers.py <skeleton>/peers.jsonl"
elif [ "$(left)" -gt 15 ]; then
  W=/tmp/suite15-skeleton/skeleton; rm -rf "$W"; mkdir -p "$W"
  fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
  nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 ||
    fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
  echo "# ref $(date '+%s.%N %Y/%m/%d %H:%M:%S.%N') $fields" > "$W/clocks.csv"
  nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 >> "$W/clocks.csv" 2>&1 &
  clock_pid=$!
  for cmd in "${SKEL[@]}"; do
    t0=$(date +%s.%N)
    rec=$(timeout 25 $cmd 2>> "$W/solder.err")
    echo "   rc $?: ${cmd#build/solder bench }"
    t1=$(date +%s.%N)
    [ -n "$rec" ] && echo "$rec" | sed "s/}[[:space:]]*\$/, \"round\": 1, \"span\": [$t0, $t1]}/" >> "$W/solder.jsonl"
    tar czf "$O/a-skeleton.tgz" -C "$(dirname "$W")" skeleton
  done
  PYTHONUNBUFFERED=1 timeout $(( $(left) > 40 ? 35 : $(left) - 5 )) python3 bench/suite15/skeleton_peers.py "$W/peers.jsonl"
  kill $clock_pid 2>/dev/null
  tar czf "$O/a-skeleton.tgz" -C "$(dirname "$W")" skeleton
else
  stamp "   skipped: too little time left"
fi

stamp "== 3. evoformer and its peers ($(left) s left)"
# FlexAttention's default mode finds no Triton config for evoformer (out of shared memory, every H100 call):
# its max-autotune mode, 15-40 s a cell, cheapest cells first (suites.py's order: B1, B8, B32, B8 hd128)
if [ "$DRY" = 1 ] || [ "$(left)" -gt 20 ]; then
  # merged_call.sh starts a Solder step only with 60 s of its DEADLINE left: give it the call's time + 55. A
  # peers step cut by the timeout keeps its finished records in r/step.jsonl: packed below with the rest
  OUT=$O/mc2 DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=1 DEADLINE=$(( $(left) + 55 )) \
    PEER_ARGS="--compile-mode max-autotune-no-cudagraphs --reps 50" SPOTS=bench/suite15/evoformer.spots \
    timeout $(( $(left) - 4 )) bash bench/merged_call.sh
  [ "$DRY" = 1 ] || { tar czf "$O/b-evoformer.tgz" -C "$O/mc2" r && rm -rf "$O/mc2"; }
else
  stamp "   skipped: too little time left"
fi
stamp "== done ($(left) s left)"
