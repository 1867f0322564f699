#!/usr/bin/env bash
# Installs what building Solder needs (when it is missing) and builds it into build/.
# Used by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v g++ >/dev/null 2>&1 || need+=(g++)
if [ ! -f /usr/include/gtest/gtest.h ] && [ ! -f /usr/local/include/gtest/gtest.h ]; then need+=(libgtest-dev); fi
# The Python package (scripts/python_setup.sh): venv and the headers of Python.
command -v python3 >/dev/null 2>&1 || need+=(python3)
if command -v python3 >/dev/null 2>&1; then
  python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
  python3 -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
    >/dev/null 2>&1 || need+=(python3-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]} with apt-get"
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi

# CMake 3.25 or newer is required.
version=$(cmake --version | head -n1 | awk '{print $3}')
if [ "$(printf '%s\n3.25\n' "$version" | sort -V | head -n1)" != "3.25" ]; then
  echo "setup: cmake $version is older than 3.25; installing a newer one from PyPI"
  python3 -m pip install -q --user "cmake>=3.25"
  export PATH="$HOME/.local/bin:$PATH"
fi

# CUTLASS/CuTe headers (PyPI nvidia-cutlass) for the sm_90a GEMM skeleton (device/solder/gemm): CMake
# finds them through python3 and compiles their folder into the runtime (SOLDER_CUTLASS_INCLUDE overrides).
cutlass_installed=0
if ! python3 -c 'import cutlass_library' >/dev/null 2>&1; then
  echo "setup: installing nvidia-cutlass==4.2.0.0 (CuTe headers) with pip"
  python3 -m pip install -q --user nvidia-cutlass==4.2.0.0 || python3 -m pip install -q --user --break-system-packages nvidia-cutlass==4.2.0.0
  cutlass_installed=1
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# ccache, when installed, makes rebuilds of other checkouts (worktrees, fresh clones) cheap.
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f build/CMakeCache.txt ] || [ "$cutlass_installed" = 1 ]; then
  cmake -S . -B build "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
jobs=$(nproc 2>/dev/null || echo 2)
echo "setup: building into build/ with $jobs jobs"
cmake --build build -j "$jobs"

# The Python package in the build tree (build/venv); never fails the C++ setup.
./scripts/python_setup.sh || echo "setup: the Python package could not be built (see above); the C++ library and the CLI are ready"
