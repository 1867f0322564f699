#!/usr/bin/env bash
# Stages bench/lrb_model/device.sh's carry folder on the build machine (no GPU): stripped `solder`,
# libgomp, this branch's device headers (SOLDER_SOURCE_DIR on the device), the device scripts, and the
# NVRTC cubins of every program the call compiles (`solder bench --compile-only` needs no GPU; the cache
# key does not depend on the program's path).
#   COMPILE=1 bench/lrb_model/stage.sh DEST       (e.g. /work/main/.devcarry/lrb-model)
# Needs build/solder (cmake).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: stage.sh DEST}
mkdir -p "$dest/tree" "$dest/cache"
[ -f "$dest/payload.tgz" ] && tar xzf "$dest/payload.tgz" -C "$dest" && rm "$dest/payload.tgz"  # staged before
dest=$(cd "$dest" && pwd)
cp build/solder "$dest/solder" && strip "$dest/solder"
cp "$(g++ -print-file-name=libgomp.so.1)" "$dest/"
rm -rf "$dest/tree/device" && cp -r device "$dest/tree/device"
cp bench/lrb_model/device.sh bench/quant_lrb/rounds.py bench/quant_lrb/summary.py "$dest/"
git log -1 --format='%h %s' > "$dest/commit.txt"
if [ "${COMPILE:-0}" = 1 ]; then
  # device.sh reads the CuTe headers through /tmp/solder-lrbm-cutlass: the same include path here.
  ln -sfn "$(cd "${SOLDER_CUTLASS_INCLUDE:?the CuTe headers, e.g. /work/main/.devcarry/cutlass}" && pwd)" /tmp/solder-lrbm-cutlass
  export SOLDER_CACHE_DIR=$dest/cache SOLDER_SOURCE_DIR=$PWD SOLDER_CUTLASS_INCLUDE=/tmp/solder-lrbm-cutlass
  TREE=$PWD bash bench/lrb_model/device.sh --list-compile "$PWD/build/solder" | sort -u | xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c
fi
# The carry folder travels in the session's 64 MB: everything but the scripts goes as one gzip tarball,
# which device.sh unpacks.
(cd "$dest" && tar czf payload.tgz solder libgomp.so.1 tree cache && rm -rf solder libgomp.so.1 tree cache)
du -sh "$dest"
