#!/usr/bin/env bash
# attn-fp8's device call (issue 17 item 1, sixteenth session): the fp8 attention skeleton and
# examples/attention_fp8.sol, from a root staged by bench/merged_stage.sh (build/solder, bin/test_sm90_attention,
# examples/, bench/), with the CuTe headers in ../cutlass. The steps merged_call.sh lacks, around it:
#   0. `solder run --backend cuda` of attention_fp8 at small sizes against the float64 reference, in the
#      background of step 1: S 256 / 512 at hd 64 / 128 on the skeleton, hd 16 (mma.sync) and a ragged S 1000
#      (the generic writer: the skeleton refuses guarded tiles), each rounding P to e4m3;
#   1. bench/merged_call.sh: the device test's e4m3 cases, then a sample of the bf16 cases (St1: staggered,
#      persistent, hd64 and hd128), `solder run` of the suite's attention_fp8 cells (VERIFY), `solder bench`
#      of the cells of bench/attention/fp8.spots with cuDNN / FlashAttention SDPA in the same call;
#   2. with the time left (NCU_SECONDS), one ncu of the hd128 S 4k kernel (`solder run`: one launch).
#   cd .devcarry/attn-fp8 && DEADLINE=115 bash bench/attention/fp8_call.sh
# Everything is written under W (/tmp/fp8-call) and copied to $OUT as it finishes (at most 8 files come
# back): the device test's e4m3 lines, the small checks, summary.md, the ncu text and one tarball of W.
set -uo pipefail
OUT_DIR=${OUT:-/tmp/out}; mkdir -p $OUT_DIR
W=${W:-/tmp/fp8-call}; O=$W; mkdir -p $O/r
start=$(date +%s); left() { echo $(( ${DEADLINE:-115} - ($(date +%s) - start) )); }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
bash bench/unpack_staged.sh   # the staged binaries (merged_stage.sh xz-compresses them)
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  for a in "--small --dim S=256 --dim D=64" "--small --dim S=256 --dim D=128" "--small --dim S=512 --dim D=128 --dim H=3" "--small" "--dim B=1 --dim H=2 --dim S=1000 --dim D=64"; do
    timeout 25 build/solder run examples/attention_fp8.sol --backend cuda $a > $O/r/small.tmp 2>&1
    echo "rc $? : solder run examples/attention_fp8.sol --backend cuda $a"; cat $O/r/small.tmp
  done
} > $O/r/small-verify.txt 2>&1 &
small_pid=$!
# merged_call.sh's guards (a solder step needs 60 s left, a peers step 30) are sized for its 440 s calls:
# here it runs under `timeout` for the real time left (MC), with DEADLINE MC + 45 s, so that its solder
# steps stop 15 s before the end and its peers run to the timeout.
MC=$(( $(left) - ${NCU_SECONDS:-25} - 5 ))
OUT=$W DEVICE_TESTS=${DEVICE_TESTS-"attention:45:e4m3 attention:15:St1"} RUN_SH=0 VERIFY=${VERIFY-'^attention_fp8-d(64|128)-s(1024|4096)$'} \
  SPOT_SECONDS=0 DEADLINE=$(( MC + 45 )) SPOTS=bench/attention/fp8.spots timeout $MC bash bench/merged_call.sh
echo "   merged_call rc $? ($(left) s left)"
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
for i in $(seq 1 10); do kill -0 $small_pid 2>/dev/null || break; sleep 1; done  # (at most 10 s more)
cp $O/r/dt-attention-e4m3.txt $O/r/dt-attention-St1.txt $O/r/small-verify.txt $O/r/summary.md $OUT_DIR/ 2>/dev/null
echo "== 0. small sizes"; grep -E "^rc|verif|error|PASS|FAIL" $O/r/small-verify.txt | head -20
if [ "$(left)" -gt 15 ] && command -v ncu > /dev/null; then
  echo "== 2. ncu of attention_fp8 hd128 S 4k ($(left) s left)"
  timeout $(( $(left) - 3 )) ncu --clock-control none --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis build/solder run examples/attention_fp8.sol --backend cuda --dim B=4 --dim S=4096 --dim D=128 \
    > $O/r/ncu-d128-s4096.txt 2>&1
  echo "   rc $?"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $O/r/ncu-d128-s4096.txt | head -12
fi
cp $O/r/ncu-d128-s4096.txt $OUT_DIR/ 2>/dev/null
tar czf $OUT_DIR/fp8-call.tgz -C $W r run 2>/dev/null || tar czf $OUT_DIR/fp8-call.tgz -C $W r
[ -f $O/r/summary.md ] && cat $O/r/summary.md
echo "== done ($(left) s left)"
