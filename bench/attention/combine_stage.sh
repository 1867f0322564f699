#!/usr/bin/env bash
# Stages bench/attention/combine_call.sh's mini repository root on the build machine (no GPU): stripped
# build/solder, bin/test_sm90_attention_dual (stripped), examples/, bench/ (without results/) and COMMIT.
#   bench/attention/combine_stage.sh DEST BINDIR     (e.g. /work/main/.devcarry/diff-combine /work/dt-diff-combine)
# BINDIR holds the dual mode's device test, built with
#   OUT_BIN=1 BUILD=BINDIR bash tests/gpu/attention_skeleton/compile_check.sh dual
# and build/solder must be rebuilt after a .cuh edit (the headers are embedded).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: combine_stage.sh DEST BINDIR}
bins=${2:?usage: combine_stage.sh DEST BINDIR}
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
cp "$bins/test_sm90_attention_dual" "$dest/bin/test_sm90_attention_dual" && strip "$dest/bin/test_sm90_attention_dual"
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
git log -1 --format='%h' > "$dest/COMMIT"
du -sh "$dest"
