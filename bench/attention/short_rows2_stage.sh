#!/usr/bin/env bash
# Stages bench/attention/short_rows2_call.sh's root on the build machine (no GPU): stripped build/solder,
# the attention device test as bin/test_sm90_attention (TEST_BIN: a binary of this tree's device/ and
# tests/gpu/ sources), examples/, bench/ (without results/), COMMIT, and the NVRTC cubins of every setting
# in short_rows2.settings and of the verification runs (compiled here with --compile-only into
# DEST/.cache/kernels: the call then compiles nothing).
#   SOLDER_CUTLASS_INCLUDE=<cute> TEST_BIN=<binary> bench/attention/short_rows2_stage.sh DEST
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: short_rows2_stage.sh DEST}
: "${TEST_BIN:?TEST_BIN names the device test binary}"
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin" "$dest/.cache/kernels"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
cp "$TEST_BIN" "$dest/bin/test_sm90_attention" && strip "$dest/bin/test_sm90_attention"
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
git log -1 --format='%h' > "$dest/COMMIT"
export SOLDER_CACHE_DIR="$dest/.cache/kernels"
# (the include path as the call spells it, $PWD/../cutlass from the staged root: NVRTC's cache key holds it,
# so the cubins hit on the device only where the staged root has this absolute path there too)
export SOLDER_CUTLASS_INCLUDE="$(cd "$dest" && pwd)/../cutlass"
# every kernel the call runs: the settings' at S 1k, the verification shapes (bench/attention/short_rows2_call.sh)
bash bench/attention/short_rows2_call.sh --commands | sed 's/$/ --compile-only/' | xargs -d '\n' -P 2 -n 1 sh -c
du -sh "$dest"
