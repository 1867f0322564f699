#!/usr/bin/env bash
# Stages bench/lrb4/device.sh's carry folder on the build machine (no GPU): stripped `solder`,
# libgomp, a tree/ with this branch's device headers (SOLDER_SOURCE_DIR on the device), examples/ and the
# bench/ python files and programs the call reads (the device gets the integrator's tree, not this
# branch's), the device scripts, and the NVRTC cubins of every program the call compiles (`solder bench
# --compile-only` needs no GPU; the cache key does not depend on the program's path).
#   COMPILE=1 SOLDER_CUTLASS_INCLUDE=/work/main/.devcarry/cutlass bench/lrb4/stage.sh DEST
#   (DEST e.g. /work/main/.devcarry/lrb4; the call: cd .devcarry/lrb4 && bash device.sh)
# Needs build/solder (cmake).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: stage.sh DEST}
mkdir -p "$dest"
[ -f "$dest/payload.tgz" ] && tar xzf "$dest/payload.tgz" -C "$dest" && rm "$dest/payload.tgz"  # staged before
dest=$(cd "$dest" && pwd)
mkdir -p "$dest/tree/bench" "$dest/cache"
cp build/solder "$dest/solder" && strip "$dest/solder"
cp "$(g++ -print-file-name=libgomp.so.1)" "$dest/"
rm -rf "$dest/tree/device" "$dest/tree/examples" "$dest/tree/bench"
cp -r device examples "$dest/tree/"
mkdir -p "$dest/tree/bench" && cp bench/*.py "$dest/tree/bench/" && cp -r bench/common bench/programs "$dest/tree/bench/"
cp bench/lrb4/device.sh bench/quant_lrb/rounds.py bench/quant_lrb/summary.py "$dest/"
git log -1 --format='%h %s' > "$dest/commit.txt"
if [ "${COMPILE:-0}" = 1 ]; then
  # device.sh reads the CuTe headers through /tmp/solder-lrb4-cutlass: the same include path here.
  ln -sfn "$(cd "${SOLDER_CUTLASS_INCLUDE:?the CuTe headers, e.g. /work/main/.devcarry/cutlass}" && pwd)" /tmp/solder-lrb4-cutlass
  export SOLDER_CACHE_DIR=$dest/cache SOLDER_SOURCE_DIR=$dest/tree SOLDER_CUTLASS_INCLUDE=/tmp/solder-lrb4-cutlass
  TREE=$dest/tree bash "$dest/device.sh" --list-compile "$dest/solder" | sort -u | xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c
fi
# The carry folder travels in the session's 64 MB: everything but the scripts goes as one gzip tarball,
# which device.sh unpacks.
(cd "$dest" && tar czf payload.tgz solder libgomp.so.1 tree cache && rm -rf solder libgomp.so.1 tree cache)
du -sh "$dest"
