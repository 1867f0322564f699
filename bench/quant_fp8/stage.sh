#!/usr/bin/env bash
# Stages bench/quant_fp8/device.sh's carry folder on the build machine (no GPU): stripped `solder` and
# the skeleton's device test, libgomp, this branch's device headers (SOLDER_SOURCE_DIR on the device),
# the device script and its peers script, and the NVRTC cubins of every program the call compiles
# (`solder bench --compile-only` needs no GPU; the cache key does not depend on the program's path).
#   COMPILE=1 bench/quant_fp8/stage.sh DEST        (e.g. /work/main/.devcarry/quant-fp8)
# Needs build/solder (cmake) and build-gemm/test_sm90_gemm (OUT_BIN=1 tests/gpu/gemm/compile_check.sh test).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: stage.sh DEST}
mkdir -p "$dest/tree" "$dest/cache"
[ -f "$dest/payload.tgz" ] && tar xzf "$dest/payload.tgz" -C "$dest" && rm "$dest/payload.tgz"  # staged before
dest=$(cd "$dest" && pwd)
cp build/solder "$dest/solder" && strip "$dest/solder"
cp build-gemm/test_sm90_gemm "$dest/test_sm90_gemm" && strip "$dest/test_sm90_gemm"
cp "$(g++ -print-file-name=libgomp.so.1)" "$dest/"
rm -rf "$dest/tree/device" && cp -r device "$dest/tree/device"
cp bench/quant_fp8/device.sh bench/quant_fp8/peers.py "$dest/"
git log -1 --format='%h %s' > "$dest/commit.txt"
if [ "${COMPILE:-0}" = 1 ]; then
  export SOLDER_CACHE_DIR=$dest/cache SOLDER_SOURCE_DIR=$PWD
  TREE=$PWD bash bench/quant_fp8/device.sh --list-compile "$PWD/build/solder" | xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c
fi
# The carry folder travels in the session's 64 MB: everything but the scripts goes as one gzip tarball
# (the cubins share most of their bytes: 15 MB -> 2.4 MB), which device.sh unpacks.
(cd "$dest" && tar czf payload.tgz solder test_sm90_gemm libgomp.so.1 tree cache && rm -rf solder test_sm90_gemm libgomp.so.1 tree cache)
du -sh "$dest"
