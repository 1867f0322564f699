#!/usr/bin/env bash
# On an H100 with torch installed: the torch.compile backend on real modules (bench/torch_modules.py),
# each compared with eager, plus CUDA-graph capture and replay (tests/gpu/torch_check.py).
# Uses the package set up by scripts/setup.sh (build/venv) unless PYTHON names another interpreter
# that can `import solder` (e.g. after `pip install .`).
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-build/venv/bin/python}"
if ! "$python" -c "import torch, solder; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "tests/gpu/torch.sh: needs a GPU, torch and solder importable by $python (SOLDER_TEST_TORCH=1 ./scripts/setup.sh)"
  exit 2
fi
"$python" -m pytest tests/python -q -p no:cacheprovider
"$python" tests/gpu/torch_check.py --dtype f32 "$@"
"$python" tests/gpu/torch_check.py --dtype bf16 "$@"
