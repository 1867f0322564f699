#!/usr/bin/env bash
# The tenth session's second integrator call: one wgmma instruction for every tile width (CuTe's extended
# shapes, device/solder/gemm/wgmma.cuh) and the cost model pricing it (src/plan/cost_model.cpp), which moves
# quant_gemm Q2 / Q3 / Q4 to 128x160 / 128x224 / 128x224. Run from a mini root like merged_s10_call.sh:
#   cd <root> && DEADLINE=330 bash merged_s10_call2.sh
#   1. the GEMM device test (its BN 160 / 224 cases now on single instructions);
#   2. quant_gemm Q2-Q4 verified at their new tiles through --backend cuda (float64 reference);
#   3. quant_gemm Q1-Q10 on the new choices, Q2-Q4 also on the previous choices (forced), and torch.compile
#      for Q2-Q4 (then the other cells with time left);
#   4. with time left: conv_chain C7 against torch.compile, gemm_chains (36 cells) against eager.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-330} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
OLD='64x256s4k1c2x1@4096,2560,1536;128x192s4k1@4096,3584,8192;128x256s4k1@4096,8192,3584'
{ python3 bench/suites.py --suite reductions --cases '^quant_gemm-' --solder-commands --compile-only --timeout 120
  SOLDER_GEMM_TILE=$OLD python3 bench/suites.py --suite reductions --cases '^quant_gemm-Q[234]$' --solder-commands --compile-only --timeout 120 | sed "s|^|SOLDER_GEMM_TILE='$OLD' |"
  python3 bench/suites.py --suite contractions --cases '^conv_chain-C7' --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite gemm_chains --solder-commands --compile-only --timeout 120
} 2>/dev/null | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &
echo "== 1. GEMM device test"
timeout 150 bin/test_sm90_gemm 2026 > $O/r/dt-gemm.txt 2>&1; echo "   gemm rc $? $(tail -n1 $O/r/dt-gemm.txt) ($(( $(date +%s)-start )) s)"
grep -h "^FAIL" $O/r/dt-gemm.txt | head -5; grep -h "qtile\|128x160" $O/r/dt-gemm.txt | head -8
echo "== 2. verification ($(left) s left)"
for d in "M=4096 N=2560 K=1536" "M=4096 N=3584 K=8192" "M=4096 N=8192 K=3584"; do
  args=$(for kv in $d; do printf -- '--dim %s ' $kv; done)
  ( timeout 60 build/solder run --backend cuda $args examples/quant_gemm.sol > "$O/r/verify-$(echo $d | tr ' =' '_-').txt" 2>&1; echo "   quant $d rc $? $(grep -o 'verified.*\|MISMATCH.*' "$O/r/verify-$(echo $d | tr ' =' '_-').txt" | head -1)" ) &
done
wait
echo "== 3. quant_gemm ($(left) s left)"
: > $O/r/solder.jsonl
python3 bench/suites.py --suite reductions --cases '^quant_gemm-' --solder-commands --timeout 30 --out $O/r/solder.jsonl 2>/dev/null | sh 2>>$O/r/solder.err
SOLDER_GEMM_TILE=$OLD python3 bench/suites.py --suite reductions --cases '^quant_gemm-Q[234]$' --solder-commands --timeout 30 --out $O/r/solder-old.jsonl 2>/dev/null | SOLDER_GEMM_TILE=$OLD sh 2>>$O/r/solder.err
echo "   solder records $(wc -l < $O/r/solder.jsonl) + $(wc -l < $O/r/solder-old.jsonl 2>/dev/null)"
P() { PYTHONUNBUFFERED=1 timeout $1 python3 bench/peers.py --no-ceilings --out $O/r/peers.jsonl "${@:2}" >> $O/r/peers.log 2>&1; echo "   peers $2 $3 $4 $5 rc $? ($(left) s left)"; }
P $(( $(left) - 90 )) --suite reductions --cases '^quant_gemm-Q[234]$' --peers compile --time-limit 120
echo "== 4. with time left ($(left) s left)"
python3 bench/suites.py --suite contractions --cases '^conv_chain-C7' --solder-commands --timeout 25 --out $O/r/solder.jsonl 2>/dev/null | sh 2>>$O/r/solder.err
P $(( $(left) - 75 )) --suite contractions --cases '^conv_chain-C7' --peers compile --time-limit 30
python3 bench/suites.py --suite gemm_chains --solder-commands --timeout 25 --out $O/r/chains.jsonl 2>/dev/null > /tmp/chains.txt
while IFS= read -r line; do [ "$(left)" -lt 45 ] && break; sh -c "$line" 2>>$O/r/solder.err; done < /tmp/chains.txt
P $(( $(left) - 10 )) --suite gemm_chains --peers eager --time-limit 25
cp $O/r/solder-old.jsonl $O/r/solder-q3-256.jsonl 2>/dev/null  # the table marks these rows as forced
python3 bench/merged_s10_table.py $O/r | sed 's/(128x256 forced)/(previous tile forced)/' | tee $O/r/summary.md
tar czf $O/r.tgz -C $O r
echo "== done ($(left) s left)"
