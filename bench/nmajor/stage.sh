#!/usr/bin/env bash
# Stages nmajor's device call (bench/nmajor/call.sh) on the build machine (no GPU): this tree's build/solder
# stripped and xz-compressed, bench/ without results, the census programs, COMMIT, and every kernel of the
# call (cells.txt and verify.txt, each line's ENV words included) compiled ahead by NVRTC into kernels.tar.xz.
# DEST must be the folder the device runs from (/work/main/.devcarry/nmajor), with DEST/../cutlass the CuTe
# headers (the compile cache's key holds the include paths).
#   bash bench/nmajor/stage.sh /work/main/.devcarry/nmajor
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/nmajor/stage.sh DEST}
root=$PWD
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/tests"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
cp -r tests/census "$dest/tests/"
git log -1 --format='%h' > "$dest/COMMIT"
commands() {
  grep -v '^\s*\(#\|$\)' bench/nmajor/cells.txt | while read -r tag envs args; do
    [ "$envs" = - ] && envs=
    echo "${envs:+$envs }$dest/build/solder bench $args --compile-only"
  done
  grep -v '^\s*\(#\|$\)' bench/nmajor/verify.txt | while read -r envs args; do
    [ "$envs" = - ] && envs=
    echo "${envs:+$envs }$dest/build/solder bench $args --compile-only"
  done
}
cd "$dest"
commands | bash "$root/bench/compile_ahead.sh"
xz -T2 -6 build/solder
du -sh "$dest" kernels.tar.xz
