#!/usr/bin/env bash
# nerf-chain's device call (issue 15; bench/NOTES.md, "sixteenth session ... nerf-chain"), from the mini root
# that bench/merged_stage.sh stages (DT=/work/dt-nerf-chain: bin/test_sm90_chain), CuTe headers in ../cutlass:
#   DT=/work/dt-nerf-chain bash bench/merged_stage.sh /work/main/.devcarry/nerf-chain
#   cd .devcarry/nerf-chain && DEADLINE=125 bash bench/nerf_chain/call.sh
#   1. bench/merged_call.sh with SPOTS=bench/nerf_chain/nerf_chain.spots: the chain's device test
#      (test_sm90_chain 2026 bench: every case against the host reference, then nerf_mlp's two chains
#      timed at M 65536), no run.sh, then `solder bench` of nerf_mlp (per-layer plan) and torch.compile
#      max-autotune-no-cudagraphs in the same call;
#   2. if time is left, one ncu of the h1..h4 chain kernel (test_sm90_chain 2026 profile), then of
#      nerf_mlp's h1 layer kernel on the skeleton (SpeedOfLight, WarpStateStats, SchedulerStats,
#      MemoryWorkloadAnalysis).
# Everything goes under $OUT/r, packed into $OUT/r.tgz; the summary table is also $OUT/summary.md.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); DEADLINE=${DEADLINE:-125}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
echo "uname -m $(uname -m); commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt

# merged_call.sh starts a spot only with 60 s of its DEADLINE left (its peers step with 30): its DEADLINE is
# this call's time left minus 20 s kept for the two ncu runs, plus 45 so that the one solder step runs.
echo "== 1. merged_call.sh: the chain's device test, solder bench, torch.compile ($(left) s left)"
DEVICE_TESTS="chain:45:bench" RUN_SH=0 PEER_ARGS="--compile-mode max-autotune-no-cudagraphs" \
  DEADLINE=$(( $(left) - 20 )) SPOTS=bench/nerf_chain/nerf_chain.spots \
  timeout $(( $(left) - 22 )) bash bench/merged_call.sh > $O/r/merged.txt 2>&1
grep -E "^(==|   )" $O/r/merged.txt | head -20
grep -E "^ *[0-9.]+ (PASS|FAIL|BENCH|OK|FAILED)" $O/r/dt-chain-bench.txt | sed 's/^ *[0-9.]* //' | grep -E "FAIL|BENCH|OK|cases" | head -12

ncu_sections="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
echo "== 2. ncu of the chain kernel and of nerf_mlp's h1 ($(left) s left)"
if [ "$(left)" -gt 12 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) > 25 ? 15 : $(left) - 6 )) ncu --clock-control none -k regex:chain_kernel --launch-count 1 $ncu_sections \
    bin/test_sm90_chain 2026 profile > $O/r/ncu-chain.txt 2>&1
  echo "   chain rc $?"
fi
if [ "$(left)" -gt 12 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) - 4 )) ncu --clock-control none -k regex:h1_kernel --launch-count 1 $ncu_sections \
    build/solder bench examples/nerf_mlp.sol --replays 2 --calls-per-replay 1 > $O/r/ncu-h1.txt 2>&1
  echo "   h1 rc $?"
else echo "   skipped (deadline)"; fi
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Cache Throughput|No Eligible|Issued Warp|Registers" \
  $O/r/ncu-chain.txt $O/r/ncu-h1.txt 2>/dev/null | head -24
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
cp $O/r/summary.md $O/summary.md 2>/dev/null
tar czf $O/r.tgz -C $O r && rm -rf $O/r $O/run.tgz
echo "== summary ($(left) s left)"; cat $O/summary.md
