#!/usr/bin/env bash
# Stages what bench/attention/alibi_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/attn-alibi, which the device call carries): the solder binary and the skeleton's
# device test (built here, stripped), device/ headers, examples/, the bench scripts and libgomp.
# Then, on the device machine: cd .devcarry/attn-alibi && SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass \
#   LD_LIBRARY_PATH=$PWD/bin bash bench/attention/alibi_call.sh OUTDIR build/solder bin/test_sm90_attention
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/attn-alibi}
BUILD=${BUILD:-$ROOT/build-attn}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$BUILD/test_sm90_attention" "$DEST/bin/" && strip "$DEST/bin/test_sm90_attention"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/device" "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT/bench/attention/alibi_call.sh" "$ROOT/bench/attention/modes_table.py" "$DEST/bench/attention/"
du -sh "$DEST"
