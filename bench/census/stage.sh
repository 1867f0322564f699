#!/usr/bin/env bash
# Stages the census's device call (bench/census/call.sh) on the build machine (no GPU): this tree's
# build/solder and main's (MAIN, default /work/main/build/solder) stripped and xz-compressed, bench/, the
# census programs and every kernel of the call compiled ahead by NVRTC (bench/compile_ahead.sh). DEST must be
# the folder the device runs from (/work/main/.devcarry/census), with DEST/../cutlass the CuTe headers.
#   bash bench/census/stage.sh /work/main/.devcarry/census
# With AB (and VERIFY) set, the kernels of bench/census/call_ab.sh's lines instead (opcopy, twenty-first session):
#   VERIFY=bench/census/opcopy_verify.txt AB=bench/census/opcopy_ab.txt bash bench/census/stage.sh /work/main/.devcarry/opcopy
# MAIN=none stages no main binary (a call whose A/B lines compare knobs of this tree only).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/census/stage.sh DEST}
root=$PWD
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/tests"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
[ "${MAIN:-}" = none ] || { cp "${MAIN:-/work/main/build/solder}" "$dest/build/solder-main" && strip "$dest/build/solder-main"; }
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
cp -r tests/census "$dest/tests/"; cp -r examples "$dest/"
git log -1 --format='%h' > "$dest/COMMIT"
commands() {
  if [ -n "${AB:-}" ]; then  # bench/census/call_ab.sh's lines: VERIFY (ENV=V words first) and AB
    grep -v '^\s*\(#\|$\)' "${VERIFY:?VERIFY with AB}" | while read -r line; do
      envs=$(echo "$line" | grep -o '^\([A-Z_]*=[^ ]* \)*'); echo "$envs $dest/build/solder bench ${line#"$envs"} --compile-only"
    done
    grep -v '^\s*\(#\|$\)' "$AB" | while read -r tag bin rest; do echo "${rest%%--*} $dest/build/$bin bench ${rest#*-- } --compile-only"; done
    return
  fi
  grep -v '^\s*\(#\|$\)' bench/census/verify.txt | while read -r args; do
    echo "$dest/build/solder bench $args --compile-only"
  done
  for cell in $(python3 bench/census/peers.py --list); do
    for bin in solder solder-main; do echo "$dest/build/$bin bench $(python3 bench/census/peers.py --dims "$cell") --compile-only"; done
  done
}
cd "$dest"
commands | bash "$root/bench/compile_ahead.sh"
for b in build/solder build/solder-main; do [ -f "$b" ] && xz -T2 -6 "$b"; done
du -sh "$dest" kernels.tar.xz
