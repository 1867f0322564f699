#!/usr/bin/env bash
# hd128-s1k's device call (issue 17, eighteenth session): vanilla / gqa hd128 on persistent blocks with two
# Q buffers ($SOLDER_ATTN_HD128_Q2=st1|bn64|bn64f) against main's one block per work tile and cuDNN SDPA.
# Run from a root staged by bench/merged_stage.sh, the CuTe headers in ../cutlass:
#   OUT=DIR BUDGET=120 bash bench/attention/hd128_q2_call.sh        (DRY_RUN=1: print the commands only)
#   1. side by side: the attention device test's cases of the three Configs ("Hq2", and "d128 s2 P Q2 St1 Ep Qr", st1's
#      hd128 case) and `solder run --backend cuda` against the float64 reference of each mode at vanilla
#      hd128 S 1k (the suite's size) and S 4k (B 1, H 4), gqa hd128 S 1k (B 2; 16 heads on 2), into
#      verify.txt (ragged lengths do not reach the skeleton: the device test's cases cover them);
#   2. bench/merged_call.sh with bench/attention/hd128_q2.spots, two rounds, into /tmp/mc, under what is left
#      of BUDGET seconds;
# then $OUT holds r.tgz (merged_call.sh's r/, with dt-*.txt and verify.txt added) and call.log (the caller's).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
start=$(date +%s); budget=${BUDGET:-120}
left() { echo $(( budget - ($(date +%s) - start) )); }
M=/tmp/mc; mkdir -p $M/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
modes="st1 bn64 bn64f"
verify_cmds() {
  for m in $modes; do
    echo "SOLDER_ATTN_HD128_Q2=$m timeout 60 build/solder run --backend cuda examples/vanilla.sol --dim B=16 --dim S=1024 --dim D=128 --dim H=16"
    echo "SOLDER_ATTN_HD128_Q2=$m timeout 60 build/solder run --backend cuda examples/vanilla.sol --dim B=1 --dim H=4 --dim S=4096 --dim D=128"
    echo "SOLDER_ATTN_HD128_Q2=$m timeout 60 build/solder run --backend cuda examples/gqa.sol --dim B=2 --dim S=1024 --dim D=128"
  done
}
if [ "${DRY_RUN:-0}" = 1 ]; then
  echo "timeout 40 bin/test_sm90_attention 2026 Hq2 > r/dt-attention-Hq2.txt"
  echo "timeout 20 bin/test_sm90_attention 2026 'd128 s2 P Q2 St1 Ep Qr' > r/dt-attention-St1EpQr.txt"
  verify_cmds
  DRY_RUN=1 OUT=$M ROUNDS=2 DEVICE_TESTS="" RUN_SH=0 SPOTS=bench/attention/hd128_q2.spots bash bench/merged_call.sh
  exit 0
fi
bash bench/unpack_staged.sh
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== 1. device test and verification ($(left) s left)"
(
  timeout 40 stdbuf -oL bin/test_sm90_attention 2026 Hq2 > $M/r/dt-attention-Hq2.txt 2>&1; echo "rc $?" >> $M/r/dt-attention-Hq2.txt
  timeout 20 stdbuf -oL bin/test_sm90_attention 2026 "d128 s2 P Q2 St1 Ep Qr" > $M/r/dt-attention-St1EpQr.txt 2>&1; echo "rc $?" >> $M/r/dt-attention-St1EpQr.txt
) &
dt=$!
verify_cmds | xargs -d '\n' -P 5 -I{} sh -c '{} > /dev/null 2>&1 && echo "verified {}" || echo "FAILED ($?) {}"' > $M/r/verify.txt
wait $dt
echo "   verify: $(grep -c ^verified $M/r/verify.txt) of $(wc -l < $M/r/verify.txt)"; grep ^FAILED $M/r/verify.txt
for f in $M/r/dt-*.txt; do echo "   $(basename $f): $(grep -c '^OK' $f) OK, $(grep -c '^FAIL' $f) FAIL, $(tail -n 2 $f | tr '\n' ' ')"; done
tar czf "$O/r.tgz" -C $M r
echo "== 2. merged_call.sh ($(left) s left)"
# r.tgz copied out every 2 s, so that a call cut short still brings back every finished step
( while sleep 2; do [ -f $M/r.tgz ] && cp $M/r.tgz "$O/r.tgz.tmp" && mv "$O/r.tgz.tmp" "$O/r.tgz"; done ) &
copier=$!
OUT=$M ROUNDS=2 DEVICE_TESTS="" RUN_SH=0 DEADLINE=400 SPOTS=bench/attention/hd128_q2.spots timeout $(( $(left) - 3 )) bash bench/merged_call.sh
echo "   merged_call rc $?"
kill $copier 2>/dev/null
tar czf "$O/r.tgz" -C $M r
echo "== done ($(left) s left)"
