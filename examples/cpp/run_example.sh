#!/usr/bin/env bash
# CI check of the installed C++ package: install the build tree into BUILD/install-test, configure
# examples/cpp against it (find_package(solder)), build it and run it on the CPU executor.
# Usage: examples/cpp/run_example.sh BUILD_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
prefix="$build/install-test"
rm -rf "$prefix" "$build/example-cpp"
cmake --install "$build" --prefix "$prefix" >/dev/null
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S "$here" -B "$build/example-cpp" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build/example-cpp" >/dev/null
SOLDER_NO_GPU=1 "$build/example-cpp/softmax_example"
