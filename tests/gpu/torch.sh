#!/usr/bin/env bash
# On an H100 with torch installed: the Python package on the GPU (tests/python/test_gpu.py: results,
# streams, CUDA-graph capture, bad input), then the torch.compile backend on the real modules of
# bench/torch_modules.py (tests/gpu/torch_check.py): bf16 at their full sizes, each against a float32
# reference as well as eager, with CUDA-graph capture + replay and mode="reduce-overhead"; then f32 at
# small sizes, and the all-Solder variant (options={"solder.linear": "solder"}) at small sizes.
# Uses the package set up by scripts/setup.sh (build/venv) unless PYTHON names another interpreter
# that can `import solder` (e.g. after `pip install .`). Exit status 1 when a check fails.
#
# TORCH_SH_JOBS=N (N > 1) runs the parts at once, at most N processes (the bf16 check one process per
# module), each into its own log under TORCH_SH_LOGS (default a temporary folder), then prints every
# log's result lines: the same checks in about the time of the slowest module (the device calls of
# bench/torch_modules_device.sh hold 240 s for everything). Extra arguments go to every torch_check.py
# run (sequential mode only when they name --modules).
set -uo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-build/venv/bin/python}"
if ! "$python" -c "import torch, solder; assert torch.cuda.is_available() and solder.cuda_available()" 2>/dev/null; then
  echo "tests/gpu/torch.sh: needs an sm_90 GPU, torch with CUDA and solder importable by $python (SOLDER_TEST_TORCH=1 ./scripts/setup.sh)"
  exit 2
fi
jobs="${TORCH_SH_JOBS:-1}"
case "$jobs" in ''|*[!0-9]*) echo "tests/gpu/torch.sh: TORCH_SH_JOBS='$jobs' is not a whole number"; exit 2 ;; esac
status=0
if [ "$jobs" -le 1 ] || [[ " $* " == *" --modules"* ]]; then
  "$python" -m pytest tests/python/test_gpu.py -q -p no:cacheprovider || status=1
  "$python" tests/gpu/torch_check.py --dtype bf16 --reduce-overhead "$@" || status=1
  "$python" tests/gpu/torch_check.py --dtype f32 --small "$@" || status=1
  "$python" tests/gpu/torch_check.py --dtype bf16 --small --linear solder "$@" || status=1
  exit $status
fi
logs="${TORCH_SH_LOGS:-$(mktemp -d)}"
mkdir -p "$logs"
modules=$("$python" -c "import sys; sys.path.insert(0, 'bench'); import torch_modules; print(' '.join(torch_modules.MODULES))")
# name|command, slowest first (the full-size bf16 modules, then the small runs and the unit tests).
parts=()
for m in $modules; do parts+=("bf16-$m|$python tests/gpu/torch_check.py --dtype bf16 --reduce-overhead --modules $m $*"); done
parts+=("f32-small|$python tests/gpu/torch_check.py --dtype f32 --small $*")
parts+=("bf16-small-linear-solder|$python tests/gpu/torch_check.py --dtype bf16 --small --linear solder $*")
parts+=("test_gpu|$python -m pytest tests/python/test_gpu.py -q -p no:cacheprovider")
running=0
for p in "${parts[@]}"; do
  name="${p%%|*}"; cmd="${p#*|}"
  while [ "$running" -ge "$jobs" ]; do wait -n; running=$((running - 1)); done
  (bash -c "$cmd" > "$logs/$name.log" 2>&1; echo $? > "$logs/$name.rc") &
  running=$((running + 1))
done
wait
for p in "${parts[@]}"; do
  name="${p%%|*}"
  rc=$(cat "$logs/$name.rc" 2>/dev/null || echo "none")
  [ "$rc" != 0 ] && status=1
  echo "== $name: exit $rc"
  grep -E "^(ok|FAIL) |passed|failed|error" "$logs/$name.log" | tail -n 12
done
echo "tests/gpu/torch.sh: logs in $logs; $([ $status -eq 0 ] && echo 'every part passed' || echo 'a part FAILED')"
exit $status
