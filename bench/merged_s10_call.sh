#!/usr/bin/env bash
# The tenth session's merged-tree call (integrator), run from a mini repository root carried to the device
# (build/solder and bin/test_sm90_* built on the build machine, examples/, bench/, tests/gpu/, COMMIT),
# with the CuTe headers in ../cutlass:  cd <root> && DEADLINE=440 bash merged_s10_call.sh
#   1. device tests: attention skeleton (staggered consumers), its dual mode, GEMM skeleton (fp8 tiles),
#      row-reduction epilogue, prologue;
#   2. tests/gpu/run.sh: every example at small and paper sizes through --backend cuda (float64 reference);
#   3. the merged planner's choices the branches moved after their calls, with peers in this call:
#      conv_chain C1/C5/C6/C7 and quant_gemm Q2/Q3/Q4/Q7/Q9 (Q3 also with 128x256 forced) against
#      torch.compile; attention S1k hd64 vanilla/gqa/causal against cuDNN; moe_routing R1-R8 against eager;
#      diff_attn hd64/hd128 S1k (Solder only: FlexAttention is in diff-one's call);
#   4. with time left: linear_relu_backward against torch.compile, gemm_chains (36 cells) against eager.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-440} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
S3_CONV='^conv_chain-'; S3_QUANT='^quant_gemm-Q(2|3|4|7|9)$'; S3_ATTN='^(vanilla|gqa|causal)-d64-s1024|^diff_attn-d(64|128)-s1024'
cmds() {  # $1: extra args
  python3 bench/suites.py --suite contractions --cases "$S3_CONV" --solder-commands $1
  python3 bench/suites.py --suite reductions --cases "$S3_QUANT" --solder-commands $1
  python3 bench/suites.py --suite attention --cases "$S3_ATTN" --solder-commands $1
  python3 bench/suites.py --suite reductions --cases '^moe_routing-' --solder-commands $1
}
# compile the suites' kernels in the background while the device tests run
{ cmds "--compile-only --timeout 120"
  python3 bench/suites.py --suite contractions --cases '^linear_relu_backward-' --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite gemm_chains --solder-commands --compile-only --timeout 120
} 2>/dev/null | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &
echo "== 1. device tests"
for t in attention:110 attention_dual:40 gemm:150 gemm_rows:40 gemm_prologue:60; do
  n=${t%%:*}; s=${t##*:}
  timeout $s bin/test_sm90_$n 2026 > $O/r/dt-$n.txt 2>&1; echo "   $n rc $? $(tail -n1 $O/r/dt-$n.txt) ($(( $(date +%s)-start )) s)"
done
grep -h "^FAIL" $O/r/dt-*.txt | head -5
echo "== 2. tests/gpu/run.sh ($(left) s left)"
SOLDER_REBUILD=0 SOLDER_GPU_PARALLEL=8 timeout $(( $(left) - 250 )) bash tests/gpu/run.sh $O/run > $O/r/run-summary.txt 2>&1; echo "   rc $?"
grep -E "MISMATCH|ERROR" $O/r/run-summary.txt | head; tail -n1 $O/r/run-summary.txt
wait
echo "== 3. spot checks with peers ($(left) s left)"
: > $O/r/solder.jsonl
cmds "--timeout 30 --out $O/r/solder.jsonl" 2>/dev/null > /tmp/cmds.txt
while IFS= read -r line; do [ "$(left)" -lt 170 ] && { echo "   deadline before: $line"; break; }; sh -c "$line" 2>>$O/r/solder.err; done < /tmp/cmds.txt
SOLDER_GEMM_TILE='128x256s4k1@4096,3584,8192' python3 bench/suites.py --suite reductions --cases '^quant_gemm-Q3$' --solder-commands --timeout 30 --out $O/r/solder-q3-256.jsonl 2>/dev/null | sh 2>>$O/r/solder.err
echo "   solder records $(wc -l < $O/r/solder.jsonl) of $(wc -l < /tmp/cmds.txt)"
P() { PYTHONUNBUFFERED=1 timeout $1 python3 bench/peers.py --no-ceilings --out $O/r/peers.jsonl "${@:2}" >> $O/r/peers.log 2>&1; echo "   peers $2 $3 $4 $5 rc $? ($(left) s left)"; }
P $(( $(left) - 140 )) --suite attention --cases "^(vanilla|gqa|causal)-d64-s1024" --peers sdpa_cudnn --time-limit 20
P $(( $(left) - 120 )) --suite reductions --cases '^moe_routing-' --peers eager --time-limit 20
P $(( $(left) - 60 )) --suite reductions --cases "$S3_QUANT" --peers compile --time-limit 60
P $(( $(left) - 20 )) --suite contractions --cases "$S3_CONV" --peers compile --time-limit 40
echo "== 4. with time left ($(left) s left)"
if [ "$(left)" -gt 60 ]; then
  python3 bench/suites.py --suite contractions --cases '^linear_relu_backward-' --solder-commands --timeout 25 --out $O/r/solder.jsonl 2>/dev/null | sh 2>>$O/r/solder.err
  P $(( $(left) - 10 )) --suite contractions --cases '^linear_relu_backward-' --peers compile --time-limit 20
fi
if [ "$(left)" -gt 60 ]; then
  python3 bench/suites.py --suite gemm_chains --solder-commands --timeout 25 --out $O/r/chains.jsonl 2>/dev/null > /tmp/chains.txt
  while IFS= read -r line; do [ "$(left)" -lt 35 ] && break; sh -c "$line" 2>>$O/r/solder.err; done < /tmp/chains.txt
  P $(( $(left) - 5 )) --suite gemm_chains --peers eager --time-limit 20
fi
python3 bench/merged_s10_table.py $O/r | tee $O/r/summary.md
tar czf $O/run.tgz -C $O run 2>/dev/null; tar czf $O/r.tgz -C $O r
echo "== done ($(left) s left)"
