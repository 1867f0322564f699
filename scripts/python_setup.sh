#!/usr/bin/env bash
# The Python package in the build tree (called by scripts/setup.sh): a virtual environment build/venv
# with numpy, pytest and nanobind from PyPI, the native module solder._solder built into build/python
# by the main CMake build (SOLDER_PYTHON=ON), and a .pth file that puts python/ and build/python on the
# venv's path, so `build/venv/bin/python -c "import solder"` works (the `solder` command is build/solder).
# `pip install .` installs the same package into any other environment (docs/python.md).
#
# SOLDER_TEST_TORCH=1 also installs torch from PyPI (about 3 GB with its CUDA packages; scripts/test.sh
# sets it unless SOLDER_TEST_TORCH=0). A failing download (no network) is reported and skipped: the C++
# library and the CLI do not need Python.
set -uo pipefail
cd "$(dirname "$0")/.."
build="${SOLDER_BUILD_DIR:-build}"   # the CMake build tree (setup.sh's build/)
venv="$build/venv"
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "python-setup: python3 -m venv failed (install python3-venv): the Python package is not set up"
    exit 0
  fi
fi
if ! "$venv/bin/python" -c "import numpy, pytest, nanobind" >/dev/null 2>&1; then
  echo "python-setup: installing numpy, pytest, nanobind into $venv (PyPI)"
  if ! timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check numpy pytest "nanobind>=2.0"; then
    echo "python-setup: pip could not install numpy/pytest/nanobind (network?): the Python package is not set up"
    exit 0
  fi
fi
if [ "${SOLDER_TEST_TORCH:-0}" = "1" ] && ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
  echo "python-setup: installing torch into $venv (PyPI; a few GB, several minutes)"
  start=$(date +%s)
  if timeout 900 "$venv/bin/pip" install -q --disable-pip-version-check torch; then
    echo "python-setup: torch installed in $(( $(date +%s) - start )) s"
  else
    echo "python-setup: torch could not be installed: the torch backend tests will be skipped"
  fi
fi
nanobind_dir=$("$venv/bin/python" -m nanobind --cmake_dir)
python_abs="$(cd "$venv/bin" && pwd)/python"
cmake "$build" -DSOLDER_PYTHON=ON -DPython_EXECUTABLE="$python_abs" -Dnanobind_DIR="$nanobind_dir" >/dev/null || exit 1
cmake --build "$build" --target _solder -j "$(nproc 2>/dev/null || echo 2)" || exit 1
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf '%s\n%s\n' "$(pwd)/python" "$(cd "$build/python" && pwd)" > "$site/solder-build-tree.pth"
"$venv/bin/python" -c "import solder; print('python-setup: import solder ok (' + solder.__file__ + ')')"
