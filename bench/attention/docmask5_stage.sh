#!/usr/bin/env bash
# Stages what bench/attention/docmask5_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/docmask5, which the device call carries): the new solder binary and the skeleton's
# device test (built here, stripped), the old solder binary (OLD_BIN: built from the branch's base, its
# device headers embedded), examples/, the bench scripts and libgomp.
# Build first: cmake --build build --target solder; OUT_BIN=1 tests/gpu/attention_skeleton/compile_check.sh test.
# The device test goes compressed (xz: 10 MB of cubins → 0.8 MB, under the carry's limit). Then, on the
# device machine: cd .devcarry/docmask5 && python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open(
#   'bin/test_sm90_attention.xz'), open('bin/test_sm90_attention', 'wb'))" && chmod +x bin/test_sm90_attention &&
#   SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass LD_LIBRARY_PATH=$PWD/bin \
#   bash bench/attention/docmask5_call.sh $OUT/docmask5 build/solder old/solder bin/test_sm90_attention
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/docmask5}
BUILD=${BUILD:-$ROOT/build-attn}
OLD_BIN=${OLD_BIN:?the base binary}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/old" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$OLD_BIN" "$DEST/old/solder" && strip "$DEST/old/solder"
cp "$BUILD/test_sm90_attention" "$DEST/bin/" && strip "$DEST/bin/test_sm90_attention" && xz -9 -T2 "$DEST/bin/test_sm90_attention"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT/bench/attention/docmask5_call.sh" "$DEST/bench/attention/"
du -sh "$DEST"
