#!/usr/bin/env bash
# Stages bench/attention/wide_call.sh's mini repository root on the build machine (no GPU): stripped
# build/solder, bin/test_sm90_attention (gzipped), examples/, bench/ (without results/) and COMMIT.
#   bench/attention/wide_stage.sh DEST BINDIR     (e.g. /work/main/.devcarry/attn-wide build-dt)
# BINDIR holds the device test, built with
#   OUT_BIN=1 BUILD=BINDIR bash tests/gpu/attention_skeleton/compile_check.sh test
# and build/solder must be rebuilt after a .cuh edit (the headers are embedded).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: wide_stage.sh DEST BINDIR}
bins=${2:?usage: wide_stage.sh DEST BINDIR}
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
cp "$bins/test_sm90_attention" "$dest/bin/test_sm90_attention" && strip "$dest/bin/test_sm90_attention"
gzip -9 "$dest/bin/test_sm90_attention"
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
git log -1 --format='%h' > "$dest/COMMIT"
du -sh "$dest"
