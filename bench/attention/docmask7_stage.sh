#!/usr/bin/env bash
# Stages what bench/attention/docmask7_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/docmask7, which the device call carries): the solder binary, the skeleton's device
# test (xz-compressed) and bench_attention, all stripped; examples/, the bench scripts, libgomp and COMMIT.
# Build first: cmake --build build --target solder; OUT_BIN=1 BUILD=$DT tests/gpu/attention_skeleton/compile_check.sh
# test and bench.
# On the device machine (carry .devcarry/docmask7 and .devcarry/cutlass):
#   cd .devcarry/docmask7 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('bin/test.xz'), open('bin/test','wb'))" &&
#   chmod +x bin/test && SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass LD_LIBRARY_PATH=$PWD/bin \
#   bash bench/attention/docmask7_call.sh /tmp/dm7 build/solder bin/test bin/bench_attention
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/docmask7}
DT=${DT:-$ROOT/build-attn}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$DT/test_sm90_attention" "$DEST/bin/test" && strip "$DEST/bin/test" && xz -9 -T2 "$DEST/bin/test"
cp "$DT/bench_attention" "$DEST/bin/bench_attention" && strip "$DEST/bin/bench_attention"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT"/bench/attention/{docmask7_call.sh,stamps_table.py,flex_docmask_build.py} "$DEST/bench/attention/"
git -C "$ROOT" log -1 --format='%h' > "$DEST/COMMIT"
du -sh "$DEST"
