#!/usr/bin/env bash
# Stages what bench/attention/exp2_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/exp2-poly, which the device call carries): the solder binary and the skeleton's
# device test (built here, stripped), device/ headers, examples/, the bench scripts, libgomp, COMMIT.
# Then, on the device machine: cd .devcarry/exp2-poly && SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass \
#   LD_LIBRARY_PATH=$PWD/bin bash bench/attention/exp2_call.sh $OUT/call build/solder bin/test_sm90_attention
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/exp2-poly}
BUILD=${BUILD:-$ROOT/build-attn}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$BUILD/test_sm90_attention" "$DEST/bin/" && strip "$DEST/bin/test_sm90_attention"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/device" "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT/bench/attention/exp2_call.sh" "$ROOT/bench/attention/exp2_table.py" "$DEST/bench/attention/"
git -C "$ROOT" rev-parse --short HEAD > "$DEST/COMMIT"
du -sh "$DEST"
