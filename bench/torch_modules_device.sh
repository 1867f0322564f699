#!/usr/bin/env bash
# One device call for bench/torch_modules.py (issue 18; run 8 of results/h100/torch_modules.md): a build
# check, the torch backend on the Llama modules (tests/gpu/torch_check.py, bf16 with reduce-overhead),
# the benchmark (Solder's variants first, then eager and torch.compile, then max-autotune on the modules
# near their target, with per-kernel profiles of the Llama modules), ncu of the stacked RoPE kernel,
# then the small-size checks of tests/gpu/torch.sh while time remains. Writes into $OUT/r, tars it.
#
#   B=FOLDER bash bench/torch_modules_device.sh
#
# B: the folder holding python/solder (with the built _solder*.so for the device's Python), bench/ and
# tests/ (default: the repository root). Needs torch and the CuTe headers (SOLDER_CUTLASS_INCLUDE, or
# .devcarry/gemm/cutlass). TOTAL: the seconds the whole script may take (default 340).
set -uo pipefail
B=${B:-$PWD}
OUT=${OUT:-/tmp/torch-modules-out}
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/.devcarry/gemm/cutlass} PYTHONPATH=$B/python PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
left() { echo $(( ${TOTAL:-340} - $(el) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $R/device.txt
echo "== 0 build check ($(el) s)"
python3 -c "import sys, torch, solder; print(sys.version.split()[0], torch.__version__, solder.__file__, solder.cuda_available())" 2>&1 | tee $R/check.txt
echo "== 1 test_gpu.py ($(el) s)"
timeout 60 python3 -m pytest tests/python/test_gpu.py -q -p no:cacheprovider > $R/test_gpu.log 2>&1; echo "rc=$?"; tail -n 2 $R/test_gpu.log
echo "== 2 torch_check bf16 reduce-overhead, llama ($(el) s)"
timeout 80 python3 $B/tests/gpu/torch_check.py --dtype bf16 --reduce-overhead --modules llama_attention_rope_gqa,llama_mlp_rmsnorm > $R/check-bf16.log 2>&1; echo "rc=$?"; grep -E "^(ok|FAIL)|passed" $R/check-bf16.log
echo "== 3 bench ($(el) s)"
timeout $(( $(left) - 60 )) python3 $B/bench/torch_modules.py --variants solder,solder-gated,solder-all,eager,compile,max-autotune \
  --max-autotune-modules llama_attention_rope_gqa,llama_mlp_rmsnorm,moe_router --time-budget 60 \
  --profile llama_attention_rope_gqa,llama_mlp_rmsnorm --inductor-cache $R/inductor-cache \
  --json $R/bench.json --log $R/bench.log --markdown $R/bench.md > $R/bench.out 2> $R/bench.err; echo "rc=$?"
tail -n 25 $R/bench.out; grep -E "^  " $R/bench.err | tail -n 30
echo "== 4 ncu of the stacked RoPE kernel ($(el) s)"
(cd $B && SOLDER_CACHE_DIR=/tmp/ncu-cache timeout $(( $(left) - 15 > 10 ? $(left) - 15 : 10 )) ncu --target-processes all \
  --kernel-name regex:'^y0_kernel$' --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section LaunchStats --section Occupancy --section WarpStateStats python3 -c "
import sys, torch; sys.path.insert(0, 'bench')
import torch_modules, solder
m, x = torch_modules.make('llama_attention_rope_gqa')
with torch.no_grad():
    torch.compile(m, backend='solder')(*x); torch.cuda.synchronize()") > $R/ncu-rope.txt 2>&1; echo "rc=$?"
grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per" $R/ncu-rope.txt | head -12
if [ $(left) -gt 40 ]; then
  echo "== 5 torch_check f32 small + bf16 small all-Solder ($(el) s)"
  timeout $(( $(left) - 12 )) bash -c "python3 $B/tests/gpu/torch_check.py --dtype f32 --small; python3 $B/tests/gpu/torch_check.py --dtype bf16 --small --linear solder" > $R/check-small.log 2>&1; echo "rc=$?"; grep -E "^(ok|FAIL)|passed" $R/check-small.log
fi
echo "== done ($(el) s)"
tar czf $OUT/inductor-cache.tgz -C $R inductor-cache 2>/dev/null; rm -rf $R/inductor-cache
tar czf $OUT/r.tgz -C $OUT r
