#!/usr/bin/env bash
# decode-attn's device call (issue 17 / 15): the online-state stream for llama_decode's attention. Runs from
# the root staged by bench/merged_stage.sh (DT=... bash bench/merged_stage.sh .devcarry/decode-attn), the
# CuTe headers in ../cutlass:
#   cd .devcarry/decode-attn && LIMIT=125 bash bench/decode_attn_call.sh
# Most important first, each step writing under $OUT as it finishes, each started only while LIMIT (seconds
# from the start) leaves it room:
#   1. bench/merged_call.sh with bench/decode_attn.spots, ROUNDS=2: `solder run --backend cuda` of
#      llama_decode KV 1k / 4k / 16k (VERIFY), then Solder's times, online stream and SOLDER_SPLIT_KV=0,
#      A/B interleaved (into $OUT/a);
#   2. more checks: llama_decode --small, and shapes the suite lacks that the writer takes (D 16: 2 lanes
#      per key and a cluster of 5; KV 3000: a ragged last segment) (into $OUT/verify-extra.txt);
#   3. bench/merged_call.sh with bench/decode_attn_peers.spots: the decode peers in the same call (into $OUT/b);
#   4. one ncu of the online-stream kernel fused_a at KV 16k ($OUT/ncu-fused_a.txt).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O
start=$(date +%s); left() { echo $(( ${LIMIT:-125} - ($(date +%s) - start) )); }
OUT=$O/a ROUNDS=2 DEVICE_TESTS="" RUN_SH=0 VERIFY='^llama_decode-kv(1024|4096|16384)$' DEADLINE=$(( $(left) - 10 )) \
  SPOTS=bench/decode_attn.spots bash bench/merged_call.sh > $O/a.log 2>&1
tail -n 30 $O/a.log
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== extra checks ($(left) s left)"
for args in "--small" "--small --dim KV=300" "--dim KV=3000"; do
  [ "$(left)" -gt 70 ] || { echo "skipped (deadline): $args" >> $O/verify-extra.txt; continue; }
  timeout 30 build/solder run --backend cuda examples/llama_decode.sol $args > $O/tmp.txt 2>&1
  echo "rc $? llama_decode $args: $(grep -E 'max|error|verified|MISMATCH' $O/tmp.txt | tail -n 2 | tr '\n' ' ')" >> $O/verify-extra.txt
done
cat $O/verify-extra.txt
if [ "$(left)" -gt 45 ]; then
  echo "== peers ($(left) s left)"
  OUT=$O/b DEVICE_TESTS="" RUN_SH=0 DEADLINE=$(( $(left) - 15 )) SPOTS=bench/decode_attn_peers.spots bash bench/merged_call.sh > $O/b.log 2>&1
  tail -n 12 $O/b.log
fi
if [ "$(left)" -gt 12 ]; then
  echo "== ncu of fused_a at KV 16k ($(left) s left)"
  timeout $(( $(left) - 3 )) ncu --clock-control none -k regex:'^fused_a$' --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    build/solder bench examples/llama_decode.sol --dim KV=16384 --replays 1 --calls-per-replay 1 > $O/ncu-fused_a.txt 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issued Warp|No Eligible|Achieved Occupancy|Registers" $O/ncu-fused_a.txt | head -12
fi
rm -f $O/tmp.txt
tar czf $O/ab.tgz -C $O a b 2>/dev/null; rm -rf $O/a $O/b
echo "== summary ($(left) s left)"
cat $O/b.log 2>/dev/null | sed -n '/^|/p' | head -20
sed -n '/^|/p' $O/a.log | head -20
