#!/usr/bin/env bash
# Stages what bench/attention/docmask6_call.sh needs on the device machine into DEST (default
# /work/main/.devcarry/docmask6, which the device call carries): the new solder binary and the skeleton's
# device test (built here from the branch), the old ones (OLD_BIN, OLD_TEST: the same test source built
# against the base commit's device headers, and the base's solder with those headers embedded), all
# stripped, the tests xz-compressed; examples/, the bench scripts, libgomp and COMMIT.
#   OLD_BIN=... OLD_TEST=... bench/attention/docmask6_stage.sh
# Build first: cmake --build build --target solder; OUT_BIN=1 tests/gpu/attention_skeleton/compile_check.sh test.
# On the device machine (carry .devcarry/docmask6 and .devcarry/cutlass):
#   cd .devcarry/docmask6 && for t in new old; do xz -dc bin/test_$t.xz > bin/test_$t; chmod +x bin/test_$t; done &&
#   SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass LD_LIBRARY_PATH=$PWD/bin \
#   bash bench/attention/docmask6_call.sh /tmp/dm6 build/solder old/solder bin/test_new bin/test_old
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/docmask6}
BUILD=${BUILD:-$ROOT/build-attn}
OLD_BIN=${OLD_BIN:?the base commit\'s solder binary}
OLD_TEST=${OLD_TEST:?the device test built against the base commit\'s headers}
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/build" "$DEST/old" "$DEST/bench/attention"
cp "$ROOT/build/solder" "$DEST/build/solder" && strip "$DEST/build/solder"
cp "$OLD_BIN" "$DEST/old/solder" && strip "$DEST/old/solder"
cp "$BUILD/test_sm90_attention" "$DEST/bin/test_new" && strip "$DEST/bin/test_new" && xz -9 -T2 "$DEST/bin/test_new"
cp "$OLD_TEST" "$DEST/bin/test_old" && strip "$DEST/bin/test_old" && xz -9 -T2 "$DEST/bin/test_old"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp -r "$ROOT/examples" "$DEST/"
cp "$ROOT"/bench/*.py "$DEST/bench/"
cp "$ROOT/bench/attention/docmask6_call.sh" "$DEST/bench/attention/"
git -C "$ROOT" log -1 --format='%h' > "$DEST/COMMIT"
du -sh "$DEST"
