#!/usr/bin/env bash
# One device call for bench/torch_modules.py and tests/gpu/torch.sh (issue 18; run 10 of
# results/h100/torch_modules.md): the correctness tests in full and all six modules × (eager, torch.compile
# default, max-autotune, backend="solder") in one call of at most 240 s:
#   t = 0        tests/gpu/torch.sh IN FULL (test_gpu.py, torch_check bf16 full size with reduce-overhead,
#                f32 small, all-Solder small), its parts at once (TORCH_SH_JOBS, one process per module),
#                stopped at TESTS s; beside them max-autotune's cold compiles in MA_WORKERS processes
#                (bench/torch_modules.py --warm-max-autotune, two modules each, one Inductor cache),
#                stopped at WARM s (run 9: six workers beside the tests starved them: torch_check printed
#                nothing and test_gpu.py stopped after 5 of 8 tests);
#   then         the benchmark alone on the GPU: Solder (its NVRTC cache filled by the tests: the "solder
#                cold" column is not cold in this run), eager, compile, then max-autotune from the warm
#                caches (the workers' cold seconds in the compile table), with --deadline.
# Writes into $OUT/r, tars it to $OUT/r.tgz and removes it; $OUT/bench.md is the table, $OUT/tests.txt the
# tests' summary.
#
#   B=FOLDER bash bench/torch_modules_device.sh
#
# B: the folder holding python/solder (with the built _solder*.so for the device's Python), bench/ and
# tests/ (default: the repository root; examples/ are read from the repository root). Needs torch and the
# CuTe headers (SOLDER_CUTLASS_INCLUDE, or .devcarry/gemm/cutlass). TOTAL (default 228), TESTS (default
# 110), WARM (default 105), MA_WORKERS (default 3).
set -uo pipefail
B=${B:-$PWD}
OUT=${OUT:-/tmp/torch-modules-out}
TOTAL=${TOTAL:-228}
TESTS=${TESTS:-110}
WARM=${WARM:-105}
MA_WORKERS=${MA_WORKERS:-3}
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/.devcarry/gemm/cutlass} PYTHONPATH=$B/python PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
left() { echo $(( TOTAL - $(el) )); }
MODS="llama_attention_rope_gqa llama_mlp_rmsnorm moe_router evoformer_row_attention nanogpt_attention diff_attention"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $R/device.txt
python3 -c "import sys, torch, solder; print(sys.version.split()[0], torch.__version__, solder.__file__, solder.cuda_available())" 2>&1 | tee $R/check.txt
echo "== 0 max-autotune workers ($MA_WORKERS) and tests/gpu/torch.sh in full start ($(el) s)"
shares=()
for ((k = 0; k < MA_WORKERS; ++k)); do shares+=(""); done
i=0
for m in $MODS; do k=$(( i % MA_WORKERS )); shares[$k]="${shares[$k]:+${shares[$k]},}$m"; i=$((i + 1)); done
pids=""
for ((k = 0; k < MA_WORKERS; ++k)); do
  [ -z "${shares[$k]}" ] && continue
  TORCHINDUCTOR_COMPILE_THREADS=3 timeout $WARM python3 $B/bench/torch_modules.py --warm-max-autotune --modules ${shares[$k]} \
    --inductor-cache $R/inductor-cache > $R/warm-$k.jsonl 2> $R/warm-$k.err &
  pids="$pids $!"
done
# In a session of its own: at TESTS s the whole group (torch.sh's parts) stops, none left beside the bench.
PYTHON=python3 TORCH_SH_JOBS=9 TORCH_SH_LOGS=$R/torch-sh setsid bash $B/tests/gpu/torch.sh > $R/tests.txt 2>&1 &
tpid=$!
( sleep $TESTS; kill -TERM -- -$tpid 2>/dev/null; sleep 2; kill -KILL -- -$tpid 2>/dev/null ) &
killer=$!
wait $tpid; trc=$?
kill $killer 2>/dev/null
echo "tests/gpu/torch.sh rc=$trc ($(el) s)" >> $R/tests.txt
cat $R/tests.txt
if ! grep -q "tests/gpu/torch.sh: logs in" $R/tests.txt; then  # stopped: each part's lines so far
  for f in $R/torch-sh/*.log; do echo "== $(basename $f .log) (stopped at $TESTS s)"; grep -E "^(ok|FAIL) |passed|failed" $f | tail -n 8; done | tee -a $R/tests.txt
fi
echo "== 2 wait for the workers ($(el) s)"
wait $pids
cat $R/warm-*.jsonl
echo "== 3 bench ($(el) s)"
warmed=$(ls $R/warm-*.jsonl | paste -sd,)
timeout $(( $(left) - 4 )) python3 $B/bench/torch_modules.py --variants solder,eager,compile,max-autotune \
  --deadline $(( $(left) - 10 )) --max-autotune-warmed $warmed --inductor-cache $R/inductor-cache \
  --profile llama_attention_rope_gqa,llama_mlp_rmsnorm,evoformer_row_attention \
  --json $R/bench.json --log $R/bench.log --markdown $R/bench.md > $R/bench.out 2> $R/bench.err; echo "rc=$?"
tail -n 30 $R/bench.out; grep -E "^  " $R/bench.err | tail -n 30
echo "== done ($(el) s)"
rm -rf $R/inductor-cache
cp $R/bench.md $OUT/bench.md 2>/dev/null; cp $R/tests.txt $OUT/tests.txt 2>/dev/null
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R  # the device tool returns at most 8 files
