#!/usr/bin/env bash
# quant_gemm Q1-Q10 on the merged binary against torch.compile in the same call (the tenth session's
# integrator, after the extended wgmma widths): Solder first (all ten), then torch.compile for Q1, Q7, Q8,
# Q9 (the cells quant-fp8 left at 1.00-1.04x or moved without a peer), then Q5, Q6, Q10 with time left.
# From the repository root on the device, the stripped solder and its NVRTC cache in .devcarry/m10e:
#   OUT=DIR DEADLINE=270 bash bench/quant_fp8/peers_call.sh
set -uo pipefail
export SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/cutlass SOLDER_CACHE_DIR=$PWD/.devcarry/m10e/cache SOLDER_COMMIT=${SOLDER_COMMIT:-}
start=$(date +%s); left() { echo $(( ${DEADLINE:-270} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 bench/suites.py --suite reductions --cases '^quant_gemm-' --solder-commands --solder .devcarry/m10e/solder --timeout 30 --out $OUT/solder.jsonl 2>/dev/null | sh 2>>$OUT/solder.err
echo "solder records $(wc -l < $OUT/solder.jsonl) ($(left) s left)"
for c in 'Q(1|7|8|9)' 'Q(5|6|10)'; do
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 15 )) python3 bench/peers.py --no-ceilings --out $OUT/peers.jsonl --suite reductions --cases "^quant_gemm-$c\$" --peers compile --time-limit $(( $(left) - 60 )) >> $OUT/peers.log 2>&1
  echo "peers $c rc $? ($(left) s left)"
done
python3 bench/merged_s10_table.py $OUT | tee $OUT/summary.md
