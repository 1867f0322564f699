#!/usr/bin/env bash
# bmc-term's device call (issue 15, eighteenth session; bench/NOTES.md, bmc-term): the split-K B-multicast
# term's tile choices against the tiles they replace. Planner-only change, so no device tests: staged by
#   DT=/nonexistent bash bench/merged_stage.sh /work/main/.devcarry/bmc-term
# and run, the CuTe headers unpacked in ../cutlass, as
#   cd .devcarry/bmc-term && LIMIT=122 bash bench/bmc_term/call.sh
# Each step writes under $OUT as it finishes and starts only while LIMIT (seconds from the start) leaves it room:
#   1. bench/merged_call.sh with bench/bmc_term/ab.spots, ROUNDS=3: `solder run --backend cuda` of the five
#      cells (VERIFY, against the float64 reference, 45 s each at most) while the kernels compile, then Solder on the planner's tiles against the
#      sixteenth session's (ffn-S3, gated_ffn-S3, quant_gemm-Q7) or the former ones (linear_relu_backward
#      nerf and wide) forced with SOLDER_GEMM_TILE, interleaved (into $OUT/a);
#   2. bench/merged_call.sh with bench/bmc_term/peers.spots: the planner's tiles once more, eager and
#      torch.compile (default mode) of the five cells (into $OUT/b).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O
start=$(date +%s); left() { echo $(( ${LIMIT:-122} - ($(date +%s) - start) )); }
# the spots' steps start only while merged_call.sh's DEADLINE leaves 60 s, the peers while it leaves 30
OUT=$O/a ROUNDS=3 DEVICE_TESTS="" RUN_SH=0 VERIFY='^(ffn-S3|gated_ffn-S3|quant_gemm-Q7|linear_relu_backward-(nerf|wide))$' \
  VERIFY_TIMEOUT=45 DEADLINE=$(left) SPOTS=bench/bmc_term/ab.spots bash bench/merged_call.sh > $O/a.log 2>&1
cat $O/a/r/verify.txt 2>/dev/null
sed -n '/over the rounds/,$p' $O/a.log | sed -n '/^|/p'
if [ "$(left)" -gt 35 ]; then
  echo "== peers ($(left) s left)"
  OUT=$O/b ROUNDS=1 DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="--compile-mode default" DEADLINE=$(( $(left) + 5 )) \
    SPOTS=bench/bmc_term/peers.spots bash bench/merged_call.sh > $O/b.log 2>&1
  sed -n '/over the rounds/,$p' $O/b.log | sed -n '/^|/p'
fi
tar czf $O/bmc-term.tgz -C $O a b a.log b.log 2>/dev/null; rm -rf $O/a $O/b
echo "== done ($(left) s left)"
