#!/usr/bin/env bash
# Builds what bench/attention/device_run.sh needs on the build machine (nvcc here, no GPU needed) and
# copies it into DEST (default: /work/main/.devcarry/attn-skeleton), binaries stripped. VARIANT=<binary>:
# an A/B build of bench_attention (other flags) that device_run.sh times next to the default.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/attn-skeleton}
BUILD=${BUILD:-$ROOT/build-attn}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" test
  OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" bench
fi
mkdir -p "$DEST/bin" "$DEST/bench/attention"
cp "$BUILD/test_sm90_attention" "$BUILD/bench_attention" "$DEST/bin/"
strip "$DEST/bin/test_sm90_attention" "$DEST/bin/bench_attention"
rm -f "$DEST/bin/bench_attention_variant"
if [ -n "${VARIANT:-}" ]; then cp "$VARIANT" "$DEST/bin/bench_attention_variant" && strip "$DEST/bin/bench_attention_variant"; fi
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"  # the device machine may lack it
cp "$ROOT/bench/attention/peer.py" "$ROOT/bench/attention/report.py" "$ROOT/bench/attention/device_run.sh" "$DEST/bench/attention/"
du -sh "$DEST"
