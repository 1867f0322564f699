#!/usr/bin/env bash
# nerf-gather's device call (issue 15; bench/NOTES.md, "seventeenth session ... nerf-gather"), from the mini
# root that bench/merged_stage.sh stages (no device tests: the change is host code only), CuTe headers in
# ../cutlass:
#   DT=/nonexistent bash bench/merged_stage.sh /work/main/.devcarry/nerf-gather
#   cd .devcarry/nerf-gather && DEADLINE=110 bash bench/nerf_gather/call.sh
#   1. `solder run --backend cuda` of nerf_mlp at its small size, at N 1000 (ragged row tiles) and at its
#      paper size, against the float64 reference (r/verify.txt);
#   2. bench/merged_call.sh with SPOTS=bench/nerf_gather/nerf_gather.spots: `solder bench` of nerf_mlp with
#      the padded copies (default) and with main's plan (SOLDER_PADDED_OPERANDS=0), torch.compile
#      max-autotune-no-cudagraphs in the same call;
#   3. two more `solder bench` of each plan, alternating (r/ab-extra.jsonl);
#   4. if time is left, one ncu of the six kernels the change makes (pad_h0, h0, pad_h5, h5, pad_hv, hv).
# Everything goes under $OUT/r, packed into $OUT/r.tgz; the summary table is also $OUT/summary.md.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); DEADLINE=${DEADLINE:-110}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
echo "uname -m $(uname -m); commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt
bash bench/unpack_staged.sh   # the staged binaries (merged_stage.sh xz-compresses them)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/r/device.txt 2>&1

echo "== 1. verify ($(left) s left)"
for args in "--small" "--dim N=1000" ""; do
  echo "-- solder run --backend cuda $args" >> $O/r/verify.txt
  timeout 30 build/solder run examples/nerf_mlp.sol --backend cuda $args >> $O/r/verify.txt 2>&1
  echo "   nerf_mlp ${args:-paper}: rc $?" | tee -a $O/r/verify.txt
done

echo "== 2. merged_call.sh: solder bench (padded, main), torch.compile ($(left) s left)"
DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="--compile-mode max-autotune-no-cudagraphs" \
  DEADLINE=$(( $(left) + 20 )) SPOTS=bench/nerf_gather/nerf_gather.spots \
  timeout $(( $(left) - 12 )) bash bench/merged_call.sh > $O/r/merged.txt 2>&1
grep -E "^(==|   )|nerf_mlp" $O/r/merged.txt | head -20

echo "== 3. more A/B rounds ($(left) s left)"
for round in 2 3; do
  for plan in padded main; do
    [ "$(left)" -gt 14 ] || break 2
    if [ $plan = main ]; then knob=0; else knob=1; fi
    rec=$(SOLDER_PADDED_OPERANDS=$knob timeout 12 build/solder bench examples/nerf_mlp.sol --json 2>> $O/r/ab-extra.err)
    echo "{\"round\": $round, \"plan\": \"$plan\", \"bench\": ${rec:-null}}" >> $O/r/ab-extra.jsonl
    echo "   round $round $plan: $(echo "$rec" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("median_us"), d.get("min_us"))' 2>/dev/null)"
  done
done

echo "== 4. ncu of the six kernels ($(left) s left)"
if [ "$(left)" -gt 15 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) - 5 )) ncu --clock-control none -k 'regex:^(pad_h0|h0_kernel|pad_h5|h5_kernel|pad_hv|hv_kernel)' --launch-count 6 \
    --section SpeedOfLight build/solder bench examples/nerf_mlp.sol --replays 2 --calls-per-replay 1 > $O/r/ncu.txt 2>&1
  echo "   rc $?"
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput" $O/r/ncu.txt | head -30
else echo "   skipped (deadline or no ncu)"; fi
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
cp $O/r/summary.md $O/summary.md 2>/dev/null
tar czf $O/r.tgz -C $O r && rm -rf $O/r
echo "== summary ($(left) s left)"; cat $O/summary.md
