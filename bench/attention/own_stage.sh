#!/usr/bin/env bash
# Stages bench/attention/own_call.sh's mini repository root on the build machine (no GPU): stripped
# build/solder, bin/test_sm90_attention and bin/bench_attention, examples/, bench/ (without results/) and
# COMMIT.
#   bench/attention/own_stage.sh DEST BINDIR     (e.g. /work/main/.devcarry/causal-own build-attn)
# BINDIR holds the two device binaries, built with
#   OUT_BIN=1 BUILD=BINDIR bash tests/gpu/attention_skeleton/compile_check.sh test   (and: bench)
# and build/solder must be rebuilt after a .cuh edit (the headers are embedded).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: own_stage.sh DEST BINDIR}
bins=${2:?usage: own_stage.sh DEST BINDIR}
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
for t in test_sm90_attention bench_attention; do
  cp "$bins/$t" "$dest/bin/$t" && strip "$dest/bin/$t"
done
gzip -9 "$dest/bin/test_sm90_attention"  # (142 kernels: 12 MB stripped, 3 MB gzipped; own_call.sh unpacks it)
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
git log -1 --format='%h' > "$dest/COMMIT"
du -sh "$dest"
