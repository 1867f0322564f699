#!/usr/bin/env bash
# nerf-copies' device call (issue 15; bench/NOTES.md, "eighteenth session ... nerf-copies"), from the mini root
# that bench/merged_stage.sh stages (no device tests: the change is host code only), CuTe headers in ../cutlass:
#   DT=/nonexistent bash bench/merged_stage.sh /work/main/.devcarry/nerf-copies
#   cd .devcarry/nerf-copies && DEADLINE=112 bash bench/nerf_copies/call.sh   (the call of 2026-11-28: steps 3-5
#   found 12 s left after the peer's max-autotune compile; give 170 or more to run them)
#   1. `solder run --backend cuda` of nerf_mlp at its small size, at N 1000 (a ragged last copy block), at
#      N 333 with IN 21 and DIN 11 (h4 at column 21: windows shifted by 3) and at its paper size, against
#      the float64 reference (r/verify.txt), with the vector copies (the default);
#   2. bench/merged_call.sh with SPOTS=bench/nerf_copies/nerf_copies.spots: `solder bench` of nerf_mlp with
#      the copies in 16-byte vectors (default) and one element per thread (SOLDER_VECTOR_ROW_COPY=0),
#      torch.compile max-autotune-no-cudagraphs in the same call;
#   3. ncu of the three copy kernels (pad_h0, pad_h5, pad_hv) with the vector writer;
#   4. two more `solder bench` of each writer, alternating (r/ab-extra.jsonl);
#   5. if time is left, ncu of the three copy kernels with the element writer.
# Everything goes under $OUT/r, packed into $OUT/r.tgz after every step; the summary table is also $OUT/summary.md.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); DEADLINE=${DEADLINE:-118}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf $O/r.tgz -C $O r 2>/dev/null; }
echo "uname -m $(uname -m); commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt
bash bench/unpack_staged.sh   # the staged binaries (merged_stage.sh xz-compresses them)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/r/device.txt 2>&1

echo "== 1. verify ($(left) s left)"
for args in "--small" "--dim N=1000" "--dim N=333 --dim IN=21 --dim DIN=11" ""; do
  echo "-- solder run --backend cuda $args" >> $O/r/verify.txt
  timeout 30 build/solder run examples/nerf_mlp.sol --backend cuda $args >> $O/r/verify.txt 2>&1
  echo "   nerf_mlp ${args:-paper}: rc $?" | tee -a $O/r/verify.txt
done
pack

echo "== 2. merged_call.sh: solder bench (vector copies, element copies), torch.compile ($(left) s left)"
DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="--compile-mode max-autotune-no-cudagraphs" \
  DEADLINE=$(( $(left) + 20 )) SPOTS=bench/nerf_copies/nerf_copies.spots OUT=$O \
  timeout $(( $(left) - 12 )) bash bench/merged_call.sh > $O/r/merged.txt 2>&1
grep -E "^(==|   )|nerf_mlp" $O/r/merged.txt | head -20
pack

ncu_copies() {  # ncu_copies KNOB: the three copy kernels of one solder bench replay
  if [ "$(left)" -gt 12 ] && command -v ncu > /dev/null; then
    SOLDER_VECTOR_ROW_COPY=$1 timeout $(( $(left) - 4 )) ncu --clock-control none -k 'regex:^pad_' --launch-count 3 \
      --section SpeedOfLight build/solder bench examples/nerf_mlp.sol --replays 2 --calls-per-replay 1 > $O/r/ncu-$1.txt 2>&1
    echo "   SOLDER_VECTOR_ROW_COPY=$1 rc $?"
    grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput" $O/r/ncu-$1.txt | head -12
  else echo "   skipped (deadline or no ncu)"; fi
  pack
}
echo "== 3. ncu of the three copies, vector writer ($(left) s left)"
ncu_copies 1

echo "== 4. more A/B rounds ($(left) s left)"
for round in 2 3; do
  for writer in vector element; do
    [ "$(left)" -gt 14 ] || break 2
    if [ $writer = element ]; then knob=0; else knob=1; fi
    rec=$(SOLDER_VECTOR_ROW_COPY=$knob timeout 12 build/solder bench examples/nerf_mlp.sol --json 2>> $O/r/ab-extra.err)
    echo "{\"round\": $round, \"writer\": \"$writer\", \"bench\": ${rec:-null}}" >> $O/r/ab-extra.jsonl
    echo "   round $round $writer: $(echo "$rec" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("median_us"), d.get("min_us"))' 2>/dev/null)"
  done
done
pack

echo "== 5. ncu of the three copies, element writer ($(left) s left)"
ncu_copies 0
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
cp $O/r/summary.md $O/summary.md 2>/dev/null
pack && rm -rf $O/r
echo "== summary ($(left) s left)"; cat $O/summary.md
