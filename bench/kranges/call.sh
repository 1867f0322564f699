#!/usr/bin/env bash
# kranges' device call (issue 15; bench/NOTES.md, "nineteenth session ... kranges"), from the mini root that
# bench/merged_stage.sh stages (DT holding test_sm90_gemm_ranges), CuTe headers in ../cutlass:
#   DT=/work/dt-kranges bash bench/merged_stage.sh /work/main/.devcarry/kranges
#   cd .devcarry/kranges && DEADLINE=118 bash bench/kranges/call.sh   (the call of 2026-11-28 used 77.7 s: its step 2
#   was skipped by a guard of 90 s, now 70)
#   1. at once: the two-range skeleton's device test (bin/test_sm90_gemm_ranges), `solder run --backend cuda`
#      of nerf_mlp on K ranges (the default) at its small size, N 1000, N 333 with IN 21 / DIN 11 (ragged
#      ranges: x's range 21, dir's 11) and its paper size against the float64 reference (r/verify.txt), and
#      the compile of the whole-copy plan (SOLDER_GEMM_K_RANGES=0) at the paper size (the kernel cache);
#   2. Solder's A/B rounds 2 and 3 (r/ab-extra.jsonl): K ranges and the whole copies, alternating;
#   3. bench/merged_call.sh with SPOTS=bench/kranges/kranges.spots, one round: `solder bench` of both plans,
#      then torch.compile max-autotune-no-cudagraphs (its compile takes ~70 s: one round of it fits).
# Everything goes under $OUT/r, packed into $OUT/r.tgz after every step.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s); DEADLINE=${DEADLINE:-124}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf $O/r.tgz -C $O r 2>/dev/null; }
echo "uname -m $(uname -m); commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt
bash bench/unpack_staged.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/r/device.txt 2>&1

echo "== 1. device test, verify (K ranges), the whole copies' compile ($(left) s left)"
i=0
for args in "--small" "--dim N=1000" "--dim N=333 --dim IN=21 --dim DIN=11" ""; do
  i=$((i + 1))
  ( timeout 60 build/solder run examples/nerf_mlp.sol --backend cuda $args > $O/r/verify-$i.txt 2>&1
    echo "   nerf_mlp ${args:-paper} (K ranges): rc $?" >> $O/r/verify-$i.txt ) &
done
( SOLDER_GEMM_K_RANGES=0 timeout 60 build/solder bench examples/nerf_mlp.sol --compile-only > $O/r/compile-whole.txt 2>&1 ) &
timeout 40 bin/test_sm90_gemm_ranges 2026 > $O/r/dt-gemm_ranges.txt 2>&1
echo "   device test rc $?: $(tail -1 $O/r/dt-gemm_ranges.txt)"
wait
for i in 1 2 3 4; do cat $O/r/verify-$i.txt >> $O/r/verify.txt; tail -1 $O/r/verify-$i.txt; done
grep -c "^PASS" $O/r/dt-gemm_ranges.txt; grep "^FAIL" $O/r/dt-gemm_ranges.txt | head -5
pack

echo "== 2. Solder A/B rounds 2 and 3 ($(left) s left)"
for round in 2 3; do
  if [ $round = 2 ]; then order="whole kranges"; else order="kranges whole"; fi
  for plan in $order; do
    [ "$(left)" -gt 70 ] || break 2   # the peer step after needs ~50 s (46 in the call of 2026-11-28)
    knob=1; [ $plan = whole ] && knob=0
    t0=$(date +%s.%N)
    rec=$(SOLDER_GEMM_K_RANGES=$knob timeout 20 build/solder bench examples/nerf_mlp.sol --json 2>> $O/r/ab-extra.err)
    echo "{\"round\": $round, \"plan\": \"$plan\", \"span\": [$t0, $(date +%s.%N)], \"bench\": ${rec:-null}}" >> $O/r/ab-extra.jsonl
    echo "   round $round $plan: $(echo "$rec" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("median_us"), d.get("min_us"), d.get("kernels"))' 2>/dev/null)"
  done
done
pack

echo "== 3. merged_call.sh: round 1, both plans and torch.compile max-autotune ($(left) s left)"
DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="--compile-mode max-autotune-no-cudagraphs" \
  DEADLINE=$(( $(left) + 25 )) SPOTS=bench/kranges/kranges.spots OUT=$O \
  timeout $(( $(left) - 3 )) bash bench/merged_call.sh > $O/r/merged.txt 2>&1
grep -E "^(==|   )|nerf_mlp" $O/r/merged.txt | head -20
[ -s $O/r/summary.md ] || python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
pack
echo "== done ($(left) s left)"
