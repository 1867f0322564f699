#!/usr/bin/env bash
# lrb5's device call (issue 15; bench/NOTES.md, "fifteenth session ... lrb5"): the steps bench/merged_call.sh
# lacks, then merged_call.sh itself. From the mini root that bench/merged_stage.sh stages, plus
# bin/runtime_device_test (tests/unit/runtime/device_test.cpp alone, linked with gtest_main and
# build/libsolder_core.a, stripped), with the CuTe headers in ../cutlass:
#   bash bench/merged_stage.sh /work/main/.devcarry/lrb5 && cp <runtime_device_test> .../bin/ (strip it)
#   cd .devcarry/lrb5 && DEADLINE=125 bash bench/lrb5/call.sh
#   1. the runtime's GPU tests (gtest RuntimeGpu.*: the fork/join capture the concurrent launches record);
#   2. in the background, `solder run --backend cuda` against float64 with the concurrent launches on (the
#      default): lrb nerf on the planner's and the forced tiles (dx also on a 2x1 cluster, and once serial),
#      small, wide, nerf_mlp small; nerf_mlp at its paper size (its sampled reference needs ~90 s);
#   3. meanwhile bench/merged_call.sh with SPOTS=bench/lrb5/lrb5.spots (no device tests, no run.sh): the
#      rounds and torch.compile (default mode) in the same call;
#   4. if time is left, one ncu of dx (the 128x256 tile) in the concurrent program.
# Everything goes under $OUT/r (r.tgz); the summary table is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); DEADLINE=${DEADLINE:-125}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
S=build/solder LRB=examples/linear_relu_backward.sol NM=examples/nerf_mlp.sol
TILES='64x64s9k8c2x1@256,256,65536;128x256s4k1@65536,256,256'
TILES_C2='64x64s9k8c2x1@256,256,65536;128x256s4k1c2x1@65536,256,256'
echo "uname -m $(uname -m); commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt

echo "== 1. runtime GPU tests"
timeout 30 bin/runtime_device_test --gtest_filter='RuntimeGpu.*:RuntimeDevice.*' > $O/r/dt-runtime.txt 2>&1
echo "   rc $? $(grep -E '^\[  (PASSED|FAILED)' $O/r/dt-runtime.txt | tr '\n' ' ')"

echo "== 2. verify with the concurrent launches, in the background (their GPU work is milliseconds) ($(left) s left)"
( timeout 100 $S run --backend cuda $NM > $O/r/run.nerf_mlp.txt 2>&1; echo "verify nerf_mlp (paper size) rc $?" > $O/r/verify-nerf_mlp.txt ) &
nm_pid=$!
printf '%s\n' "lrb.nerf||$LRB" "lrb.nerf.forced|SOLDER_GEMM_TILE=$TILES|$LRB" \
  "lrb.nerf.forced.serial|SOLDER_CONCURRENT=0 SOLDER_GEMM_TILE=$TILES|$LRB" \
  "lrb.nerf.forced.dxc2|SOLDER_GEMM_TILE=$TILES_C2|$LRB" "lrb.small||$LRB --small" \
  "lrb.wide||$LRB --dim N=16384 --dim CI=1024 --dim CO=1024" "nerf_mlp.small||$NM --small" > $O/r/verify-list.txt
export S O
verify_one() {
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 45 $S run --backend cuda $args > $O/r/run.$label.txt 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 200 $O/r/run.$label.txt | tr '\n' ' ')"; fi
}
export -f verify_one
timeout 50 xargs -d '\n' -P 7 -n 1 bash -c 'verify_one "$1"' _ < $O/r/verify-list.txt > $O/r/verify.txt &
verify_pid=$!

# merged_call.sh starts a spot only with 60 s of its DEADLINE left (kept for its peers): its DEADLINE is
# this call's time left plus 15 s, so that spots run until 45 s before the end; `timeout` ends it in time.
echo "== 3. merged_call.sh: the rounds and torch.compile ($(left) s left)"
DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="--compile-mode default" DEADLINE=$(( $(left) + 15 )) SPOTS=bench/lrb5/lrb5.spots \
  timeout $(( $(left) - 6 )) bash bench/merged_call.sh > $O/r/merged.txt 2>&1
grep -E "^(==|   )" $O/r/merged.txt | head -20
wait $verify_pid; sort $O/r/verify.txt | sed 's/^/   /'

echo "== 4. ncu of dx in the concurrent program, if time is left ($(left) s left)"
if [ "$(left)" -gt 16 ]; then
  SOLDER_GEMM_TILE="$TILES" timeout $(( $(left) - 8 )) ncu --clock-control none -k regex:dx --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    $S bench $LRB --replays 2 --calls-per-replay 1 > $O/r/ncu-dx.txt 2>&1
  echo "   rc $?"
else echo "   skipped (deadline)"; fi
wait $nm_pid 2>/dev/null; cat $O/r/verify-nerf_mlp.txt 2>/dev/null
echo "== summary ($(left) s left)"; sort $O/r/verify.txt; cat $O/r/verify-nerf_mlp.txt 2>/dev/null
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
cat $O/r/summary.md
tar czf $O/r.tgz -C $O r
