#!/usr/bin/env bash
# Install what is needed, build, and run every test (unit and end-to-end, then the Python package's
# tests). CI runs exactly this. SOLDER_TEST_TORCH=0 skips installing torch (its tests then skip).
set -euo pipefail
cd "$(dirname "$0")/.."
export SOLDER_TEST_TORCH="${SOLDER_TEST_TORCH:-1}"
./scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j "$jobs"
# The Python package (tests/python): on the CPU executor with NumPy, and the torch.compile backend with
# torch on the CPU. No tests collected (exit 5: the package could not be set up offline) is not a failure.
if [ -x build/venv/bin/python ] && build/venv/bin/python -c "import solder" >/dev/null 2>&1; then
  set +e
  build/venv/bin/python -m pytest tests/python -q -rs -p no:cacheprovider
  rc=$?
  set -e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
else
  echo "test: the Python package is not set up (see python-setup above): Python tests skipped"
fi
