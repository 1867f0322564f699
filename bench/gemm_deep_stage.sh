#!/usr/bin/env bash
# Stages bench/gemm_deep_device.sh's carry folder on the build machine (no GPU): stripped `solder` and
# the skeleton's device test, libgomp, this branch's device headers (the device's tree may be another
# checkout: SOLDER_SOURCE_DIR), the device script and its peers script, and the NVRTC cubins of every
# program the call benches (`solder bench --compile-only`, which needs no GPU).
#   bench/gemm_deep_stage.sh DEST        (e.g. ../main/.devcarry/gemm-deep)
# Needs build/solder (cmake) and build-gemm/test_sm90_gemm (OUT_BIN=1 tests/gpu/gemm/compile_check.sh test).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: gemm_deep_stage.sh DEST}
mkdir -p "$dest/tree" "$dest/cache"
cp build/solder "$dest/solder" && strip "$dest/solder"
cp build-gemm/test_sm90_gemm "$dest/test_sm90_gemm" && strip "$dest/test_sm90_gemm"
cp "$(g++ -print-file-name=libgomp.so.1)" "$dest/"
rm -rf "$dest/tree/device" && cp -r device "$dest/tree/device"
cp bench/gemm_deep_device.sh bench/gemm_deep_peers.py "$dest/"
git log -1 --format='%h %s' > "$dest/commit.txt"
# The cubins (COMPILE=1): the same command lines the device script builds (its SWEEP list, the suites'
# cases); otherwise the device compiles them in parallel at the start of the call.
if [ "${COMPILE:-0}" = 1 ]; then
  export SOLDER_CACHE_DIR=$PWD/$dest/cache SOLDER_SOURCE_DIR=$PWD
  bash bench/gemm_deep_device.sh --list-compile "$PWD/build/solder" | xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c
fi
du -sh "$dest"
