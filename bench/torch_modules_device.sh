#!/usr/bin/env bash
# One device call for bench/torch_modules.py (issue 18; run 9 of results/h100/torch_modules.md), all six
# modules × (eager, torch.compile default, max-autotune, backend="solder") in one call of at most 240 s:
#   t = 0        max-autotune's cold compiles start in the background, one worker process per module
#                (bench/torch_modules.py --warm-max-autotune, filling one Inductor cache), stopped at WARM s;
#                beside them tests/python/test_gpu.py (45 s at most);
#   then         the benchmark alone on the GPU: Solder (cold and warm compile), eager, compile, then
#                max-autotune from the warm caches (the workers' cold seconds in the compile table), with
#                --deadline, leaving ~30 s for
#   last         tests/gpu/torch_check.py (bf16 full size, CUDA-graph replay, mode="reduce-overhead"),
#                module by module while time remains (run 9 ran it beside the workers: it finished none).
# Writes into $OUT/r, tars it to $OUT/r.tgz and removes it; $OUT/bench.md is the table.
#
#   B=FOLDER bash bench/torch_modules_device.sh
#
# B: the folder holding python/solder (with the built _solder*.so for the device's Python), bench/ and
# tests/ (default: the repository root; examples/ are read from the repository root). Needs torch and the
# CuTe headers (SOLDER_CUTLASS_INCLUDE, or .devcarry/gemm/cutlass). TOTAL (default 225), WARM (default 75; run 9's workers needed 41–55 s).
set -uo pipefail
B=${B:-$PWD}
OUT=${OUT:-/tmp/torch-modules-out}
TOTAL=${TOTAL:-225}
WARM=${WARM:-75}
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/.devcarry/gemm/cutlass} PYTHONPATH=$B/python PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
left() { echo $(( TOTAL - $(el) )); }
MODS="llama_attention_rope_gqa llama_mlp_rmsnorm moe_router evoformer_row_attention nanogpt_attention diff_attention"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $R/device.txt
python3 -c "import sys, torch, solder; print(sys.version.split()[0], torch.__version__, solder.__file__, solder.cuda_available())" 2>&1 | tee $R/check.txt
echo "== 0 max-autotune workers start ($(el) s)"
pids=""
for m in $MODS; do
  TORCHINDUCTOR_COMPILE_THREADS=4 timeout $WARM python3 $B/bench/torch_modules.py --warm-max-autotune --modules $m \
    --inductor-cache $R/inductor-cache > $R/warm-$m.jsonl 2> $R/warm-$m.err &
  pids="$pids $!"
done
echo "== 1 test_gpu.py beside the workers ($(el) s)"
timeout 45 python3 -m pytest tests/python/test_gpu.py -q -p no:cacheprovider > $R/test_gpu.log 2>&1; echo "rc=$?"; tail -n 2 $R/test_gpu.log
echo "== 2 wait for the workers ($(el) s)"
wait $pids
cat $R/warm-*.jsonl
echo "== 3 bench ($(el) s)"
warmed=$(ls $R/warm-*.jsonl | paste -sd,)
timeout $(( $(left) - 32 )) python3 $B/bench/torch_modules.py --variants solder,eager,compile,max-autotune \
  --deadline $(( $(left) - 38 )) --max-autotune-warmed $warmed --inductor-cache $R/inductor-cache \
  --profile llama_attention_rope_gqa,llama_mlp_rmsnorm,evoformer_row_attention \
  --json $R/bench.json --log $R/bench.log --markdown $R/bench.md > $R/bench.out 2> $R/bench.err; echo "rc=$?"
tail -n 30 $R/bench.out; grep -E "^  " $R/bench.err | tail -n 30
echo "== 4 torch_check bf16 reduce-overhead, while time remains ($(el) s)"
timeout $(( $(left) - 6 > 5 ? $(left) - 6 : 5 )) python3 $B/tests/gpu/torch_check.py --dtype bf16 --reduce-overhead \
  --modules evoformer_row_attention,llama_attention_rope_gqa,llama_mlp_rmsnorm,moe_router,nanogpt_attention,diff_attention > $R/check-bf16.log 2>&1; echo "rc=$?"
grep -E "^(ok|FAIL)|passed|failed" $R/check-bf16.log
echo "== done ($(el) s)"
rm -rf $R/inductor-cache
cp $R/bench.md $OUT/bench.md 2>/dev/null
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R  # the device tool returns at most 8 files
