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
#   2. more checks (into $OUT/verify-extra.txt): bench/decode_attn/attention.sol, the attention alone with its
#      output `a` checked directly and peaked scores, at KV 1k, 16k and --small (D 16: 2 lanes per key,
#      16 keys per warp load, a cluster of 5); llama_decode --small (the generic writer) and KV 3000;
#   3. bench/merged_call.sh with bench/decode_attn_peers.spots: the decode peers in the same call, KV 16k
#      first (into $OUT/b);
#   4. one ncu of the online-stream kernel fused_a at KV 16k ($OUT/ncu-fused_a.txt).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O
start=$(date +%s); left() { echo $(( ${LIMIT:-125} - ($(date +%s) - start) )); }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# unpacked here as bench/merged_call.sh would (it skips what is unpacked), so the extra checks compile while it runs
bash bench/unpack_staged.sh
EXTRA=("bench/decode_attn/attention.sol" "bench/decode_attn/attention.sol --dim KV=16384" "bench/decode_attn/attention.sol --small"
  "examples/llama_decode.sol --small" "examples/llama_decode.sol --dim KV=3000")
source bench/extra_checks.sh
extra_compile "${EXTRA[@]}"
OUT=$O/a ROUNDS=2 DEVICE_TESTS="" RUN_SH=0 VERIFY='^llama_decode-kv(1024|4096|16384)$' DEADLINE=$(( $(left) - 10 )) \
  SPOTS=bench/decode_attn.spots bash bench/merged_call.sh > $O/a.log 2>&1
tail -n 30 $O/a.log
echo "== extra checks ($(left) s left)"
extra_verify $O/verify-extra.txt 55 "${EXTRA[@]}"
if [ "$(left)" -gt 40 ]; then
  echo "== peers ($(left) s left)"
  OUT=$O/b DEVICE_TESTS="" RUN_SH=0 DEADLINE=$(( $(left) - 14 )) SPOTS=bench/decode_attn_peers.spots bash bench/merged_call.sh > $O/b.log 2>&1
  tail -n 12 $O/b.log
fi
if [ "$(left)" -gt 12 ]; then
  echo "== ncu of fused_a at KV 16k ($(left) s left)"
  timeout $(( $(left) - 3 )) ncu --clock-control none -k regex:'^fused_a$' --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    build/solder bench examples/llama_decode.sol --dim KV=16384 --replays 1 --calls-per-replay 1 > $O/ncu-fused_a.txt 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Issued Warp|No Eligible|Achieved Occupancy|Registers" $O/ncu-fused_a.txt | head -12
fi
tar czf $O/ab.tgz -C $O a b 2>/dev/null; rm -rf $O/a $O/b
echo "== summary ($(left) s left)"
cat $O/b.log 2>/dev/null | sed -n '/^|/p' | head -20
sed -n '/^|/p' $O/a.log | head -20
