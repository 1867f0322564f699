#!/usr/bin/env bash
# decode16k's device call (issues 17 / 15): llama_decode's attention on the online-state stream with its
# loads one step ahead. Runs from the root staged by bench/merged_stage.sh (DT=... bash bench/merged_stage.sh
# .devcarry/decode16k), the CuTe headers in ../cutlass:
#   cd .devcarry/decode16k && LIMIT=118 bash bench/decode16k/call.sh
# Most important first, each step writing under $OUT as it finishes, each started only while LIMIT (seconds
# from the start) leaves it room:
#   1. bench/merged_call.sh with bench/decode16k/ab.spots, ROUNDS=3: `solder run --backend cuda` of
#      llama_decode KV 1k / 4k / 16k (VERIFY), then Solder's times with the loads one step ahead and with
#      SOLDER_ONLINE_STREAM_PREFETCH=0 (main's kernel), A/B interleaved (into $OUT/a);
#   2. more checks (into $OUT/verify-extra.txt): llama_decode --small (the generic writer) and KV 3000,
#      bench/decode_attn/attention.sol (the attention alone, its output `a` checked directly, peaked scores)
#      at KV 1k, 16k and --small (D 16: 2 lanes per key, a cluster of 5);
#   3. bench/merged_call.sh with bench/decode16k/peers.spots: eager + SDPA and eager at every KV, torch.compile
#      max-autotune at KV 16k, beside Solder's default (into $OUT/b);
#   4. ncu of the five kernels of llama_decode KV 16k (default), then of fused_a with
#      SOLDER_ONLINE_STREAM_PREFETCH=0 ($OUT/ncu-*.txt).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O
start=$(date +%s); left() { echo $(( ${LIMIT:-118} - ($(date +%s) - start) )); }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bash bench/unpack_staged.sh   # the staged binaries (merged_stage.sh xz-compresses them)
EXTRA=("examples/llama_decode.sol --small" "examples/llama_decode.sol --dim KV=3000" "bench/decode_attn/attention.sol"
  "bench/decode_attn/attention.sol --dim KV=16384" "bench/decode_attn/attention.sol --small")
source bench/extra_checks.sh
extra_compile "${EXTRA[@]}"
OUT=$O/a ROUNDS=3 DEVICE_TESTS="" RUN_SH=0 VERIFY='^llama_decode-kv(1024|4096|16384)$' DEADLINE=$(( $(left) + 20 )) \
  SPOTS=bench/decode16k/ab.spots bash bench/merged_call.sh > $O/a.log 2>&1
sed -n '/over the rounds/,$p' $O/a.log | sed -n '/^|/p'
echo "== extra checks ($(left) s left)"
extra_verify $O/verify-extra.txt 60 "${EXTRA[@]}"
if [ "$(left)" -gt 35 ]; then
  echo "== peers ($(left) s left)"
  OUT=$O/b DEVICE_TESTS="" RUN_SH=0 DEADLINE=$(( $(left) + 8 )) SPOTS=bench/decode16k/peers.spots bash bench/merged_call.sh > $O/b.log 2>&1
  sed -n '/over the rounds/,$p' $O/b.log | sed -n '/^|/p'
fi
for v in default whole; do
  [ "$(left)" -gt 10 ] || break
  echo "== ncu, $v ($(left) s left)"
  env=(); kern=(-k regex:'^(q_kernel|k_new_kernel|v_new_kernel|fused_a|y_kernel)$' --launch-count 5); [ $v = whole ] && env=(SOLDER_ONLINE_STREAM_PREFETCH=0) && kern=(-k regex:'^fused_a$' --launch-count 1)
  timeout $(( $(left) - 3 )) env "${env[@]}" ncu --clock-control none "${kern[@]}" --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section WarpStateStats build/solder bench examples/llama_decode.sol --dim KV=16384 --replays 1 --calls-per-replay 1 > $O/ncu-$v.txt 2>&1
  grep -E "^  [a-z_]+_kernel|^  fused_a|Duration|DRAM Throughput|Issued Warp|Registers Per" $O/ncu-$v.txt | head -30
done
tar czf $O/decode16k.tgz -C $O a b verify-extra.txt $(cd $O && ls ncu-*.txt 2>/dev/null) a.log b.log 2>/dev/null; rm -rf $O/a $O/b
echo "== done ($(left) s left)"
