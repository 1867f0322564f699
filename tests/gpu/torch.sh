#!/usr/bin/env bash
# On an H100 with torch installed: the Python package on the GPU (tests/python/test_gpu.py: results,
# streams, CUDA-graph capture, bad input), then the torch.compile backend on the real modules of
# bench/torch_modules.py (tests/gpu/torch_check.py): bf16 at their full sizes, each against a float32
# reference as well as eager, with CUDA-graph capture + replay and mode="reduce-overhead"; then f32 at
# small sizes, and the all-Solder variant (options={"solder.linear": "solder"}) at small sizes.
# Uses the package set up by scripts/setup.sh (build/venv) unless PYTHON names another interpreter
# that can `import solder` (e.g. after `pip install .`). Exit status 1 when a check fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-build/venv/bin/python}"
if ! "$python" -c "import torch, solder; assert torch.cuda.is_available() and solder.cuda_available()" 2>/dev/null; then
  echo "tests/gpu/torch.sh: needs an sm_90 GPU, torch with CUDA and solder importable by $python (SOLDER_TEST_TORCH=1 ./scripts/setup.sh)"
  exit 2
fi
status=0
"$python" -m pytest tests/python/test_gpu.py -q -p no:cacheprovider || status=1
"$python" tests/gpu/torch_check.py --dtype bf16 --reduce-overhead "$@" || status=1
"$python" tests/gpu/torch_check.py --dtype f32 --small "$@" || status=1
"$python" tests/gpu/torch_check.py --dtype bf16 --small --linear solder "$@" || status=1
exit $status
