#!/usr/bin/env bash
# Builds what bench/gemm/device_run.sh needs on the build machine (nvcc here, no GPU needed) and copies it
# into DEST (default: /work/main/.devcarry/gemm) with the device headers and a trimmed CuTe include tree
# (cute/ and cutlass/ without gemm/, epilogue/, conv/: ~15 MB).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/gemm}
BUILD=${BUILD:-$ROOT/build-gemm}
CUTLASS=${SOLDER_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/gemm/compile_check.sh" test
  OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/gemm/compile_check.sh" bench
  g++ -O2 -std=c++17 -I/usr/local/cuda/include -o "$BUILD/nvrtc_time" "$ROOT/bench/gemm/nvrtc_time.cpp" -L/usr/local/cuda/lib64 -lnvrtc
fi
mkdir -p "$DEST/bin" "$DEST/bench/gemm"
cp "$BUILD/test_sm90_gemm" "$BUILD/bench_gemm" "$BUILD/nvrtc_time" "$DEST/bin/"
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"  # the device machine may lack it
rm -rf "$DEST/device" && cp -r "$ROOT/device" "$DEST/device"
cp "$ROOT/bench/gemm/peer.py" "$ROOT/bench/gemm/device_run.sh" "$DEST/bench/gemm/"
rm -rf "$DEST/cutlass" && cp -r "$CUTLASS" "$DEST/cutlass" && rm -rf "$DEST/cutlass/cutlass/gemm" "$DEST/cutlass/cutlass/epilogue" "$DEST/cutlass/cutlass/conv"
du -sh "$DEST"
