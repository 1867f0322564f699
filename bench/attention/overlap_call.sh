#!/usr/bin/env bash
# The s-overlap branch's device call (bench/NOTES.md, fifteenth session, s-overlap): bench/merged_call.sh
# on a root staged by bench/merged_stage.sh (DT=/work/dt-s-overlap bash bench/merged_stage.sh
# /work/main/.devcarry/s-overlap), with SOLDER_ATTN_OVERLAP=bn64 exported for the whole call:
#   1. the skeleton's device test, the OverlapS cases ("Ov": each bit for bit against the same Config
#      without, and against the float64 reference) first, then a short sample of the rest;
#   2b. `solder run --backend cuda` of evoformer B1, alibi S 1k, vanilla hd128 S 1k and causal hd128 S 4k
#      with the knob on;
#   3. the A/B of bench/attention/overlap.spots (off / on / on / off; the off lines set the knob to 0), the
#      peers on the last round's lines;
#   4. with TOTAL − LIMIT seconds or more left: one ncu of evoformer B1's kernel with the knob on.
# merged_call.sh's own guards count from DEADLINE; this wrapper stops it at LIMIT seconds and packs r/ into
# one file, with the table of whatever finished.
#   cd .devcarry/s-overlap && LIMIT=110 TOTAL=124 bash bench/attention/overlap_call.sh
set -u
O=${OUT:-/tmp/out}
mkdir -p $O
start=$(date +%s)
export SOLDER_ATTN_OVERLAP=bn64
DEVICE_TESTS=${DEVICE_TESTS:-attention:26:Ov attention:3:P} RUN_SH=0 DEADLINE=${DEADLINE:-190} \
  VERIFY='^(evoformer-b1-d64|alibi-d64-s1024|vanilla-d128-s1024|causal-d128-s4096)$' \
  SPOTS=bench/attention/overlap.spots timeout ${LIMIT:-110} bash bench/merged_call.sh > $O/call.log 2>&1
echo "merged_call rc $? at $(( $(date +%s) - start )) s" >> $O/call.log
left=$(( ${TOTAL:-124} - ($(date +%s) - start) ))
if [ "$left" -gt 12 ] && command -v ncu > /dev/null; then
  export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
  timeout $(( left - 4 )) ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section LaunchStats build/solder bench examples/evoformer.sol --dim B=1 --dim S1=256 \
    --dim S2=256 --dim H=4 --dim D=64 --replays 1 > $O/ncu-evoformer-b1-on.txt 2>&1
  echo "ncu rc $? ($left s were left)" >> $O/call.log
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issued Warp|No Eligible|Warp Cycles Per Issued|Registers Per|Eligible Warps" \
    $O/ncu-evoformer-b1-on.txt | head -12 >> $O/call.log
fi
[ -f $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
[ -f $O/r.tgz ] || tar czf $O/r.tgz -C $O r
rm -rf $O/r
cat $O/call.log
