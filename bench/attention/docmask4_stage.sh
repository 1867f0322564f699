#!/usr/bin/env bash
# Stages what bench/attention/docmask4_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/docmask4, which the device call carries): the solder binary and the skeleton's
# device test (built here, stripped), device/ headers, examples/, the bench scripts and libgomp.
# Build first: cmake --build build --target solder; OUT_BIN=1 tests/gpu/attention_skeleton/compile_check.sh test.
# Then, on the device machine: cd .devcarry/docmask4 && SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass \
#   LD_LIBRARY_PATH=$PWD/bin bash bench/attention/docmask4_call.sh $OUT/docmask4 build/solder bin/test_sm90_attention
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/docmask4}
BUILD=${BUILD:-$ROOT/build-attn}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$BUILD/test_sm90_attention" "$DEST/bin/" && strip "$DEST/bin/test_sm90_attention"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/device" "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT/bench/attention/docmask4_call.sh" "$DEST/bench/attention/"
du -sh "$DEST"
