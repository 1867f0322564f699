#!/usr/bin/env bash
# fp8-hd64's device call (issue 17, seventeenth session): fp8 attention at head dim 64 in 64-byte rows, from a
# root staged by bench/merged_stage.sh (build/solder, bin/test_sm90_attention, examples/, bench/), with the
# CuTe headers in ../cutlass:
#   0. in the background of step 1, `solder run --backend cuda` of attention_fp8 at small sizes against the
#      float64 reference: hd64 S 256 (2 consumers) and with 3 consumers forced, hd32 (zero-filled in the hd64
#      Config), hd64 S 2048 (3 consumers, a ragged last 192-row tile), hd128 S 256, hd64 padded (main's form);
#   1. bench/merged_call.sh: the device test's e4m3 cases (hd128, hd64 padded and the new hd64 Configs), `solder
#      run` of the suite's attention_fp8 cells (VERIFY), then ROUNDS (default 2) of bench/attention/fp8_hd64.spots:
#      the hd64 cells in 64-byte rows, padded, with the other consumer count, hd128 S 4k, cuDNN bf16 SDPA;
#   2. with the time left (at least NCU_SECONDS), ncu of the hd64 S 4k kernel (one launch).
#   cd .devcarry/fp8-hd64 && DEADLINE=115 bash bench/attention/fp8_hd64_call.sh
# Everything goes under W (/tmp/fp8-hd64) and back as $OUT/fp8-hd64.tgz, with summary.md and the small checks.
set -uo pipefail
OUT_DIR=${OUT:-/tmp/out}; mkdir -p $OUT_DIR
W=${W:-/tmp/fp8-hd64}; O=$W; mkdir -p $O/r
start=$(date +%s); left() { echo $(( ${DEADLINE:-115} - ($(date +%s) - start) )); }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
bash bench/unpack_staged.sh   # the staged binaries (merged_stage.sh xz-compresses them)
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  for a in "--small --dim S=256 --dim D=64" "SOLDER_ATTN_CONSUMERS=3 --small --dim S=256 --dim D=64" "--small --dim S=256 --dim D=32" \
           "--dim B=1 --dim H=2 --dim S=2048 --dim D=64" "--small --dim S=256 --dim D=128" "SOLDER_ATTN_FP8_HD64=padded --small --dim S=256 --dim D=64"; do
    envs=$(printf '%s\n' $a | grep '^SOLDER_' | tr '\n' ' '); args=$(printf '%s\n' $a | grep -v '^SOLDER_' | tr '\n' ' ')
    env $envs timeout 25 build/solder run examples/attention_fp8.sol --backend cuda $args > $O/r/small.tmp 2>&1
    echo "rc $? : $envs solder run examples/attention_fp8.sol --backend cuda $args"; cat $O/r/small.tmp
  done
} > $O/r/small-verify.txt 2>&1 &
small_pid=$!
NCU=${NCU_SECONDS:-15}
MC=$(( $(left) - NCU - 5 ))
OUT=$W ROUNDS=${ROUNDS:-2} DEVICE_TESTS=${DEVICE_TESTS-"attention:40:e4m3"} RUN_SH=0 VERIFY=${VERIFY-'^attention_fp8-d(64|128)-s(1024|4096|16384)$'} \
  SPOT_SECONDS=0 DEADLINE=$(( MC + 45 )) SPOTS=bench/attention/fp8_hd64.spots timeout $MC bash bench/merged_call.sh
echo "   merged_call rc $? ($(left) s left)"
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
for i in $(seq 1 10); do kill -0 $small_pid 2>/dev/null || break; sleep 1; done
cp $O/r/small-verify.txt $O/r/summary.md $OUT_DIR/ 2>/dev/null
echo "== 0. small sizes"; grep -E "^rc|verif|error|FAIL" $O/r/small-verify.txt | head -24
echo "== device test"; grep -E "FAIL|passed|e4m3 d64" $O/r/dt-attention-e4m3.txt | grep -v "^ *[0-9.]* OK" | tail -5
grep -c "OK   e4m3 d64" $O/r/dt-attention-e4m3.txt
echo "== verify"; cat $O/r/verify.txt 2>/dev/null | cut -c1-160
if [ "$(left)" -gt 12 ] && command -v ncu > /dev/null; then
  echo "== 2. ncu of attention_fp8 hd64 S 4k ($(left) s left)"
  timeout $(( $(left) - 3 )) ncu --clock-control none --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis build/solder run examples/attention_fp8.sol --backend cuda --dim B=4 --dim S=4096 --dim D=64 --dim H=16 \
    > $O/r/ncu-d64-s4096.txt 2>&1
  echo "   rc $?"; grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per" $O/r/ncu-d64-s4096.txt | head -10
fi
tar czf $OUT_DIR/fp8-hd64.tgz -C $W r 2>/dev/null
[ -f $O/r/summary.md ] && cat $O/r/summary.md
echo "== done ($(left) s left)"
