#!/usr/bin/env bash
# Compiles the tile-primitive device tests (test_tile.cu, test_block_gemm.cu, test_wgmma.cu, attention_wgmma_proto.cu, test_topk.cu, test_reduce_combine.cu) and each header of device/solder/tile on its own for sm_90a with
# nvcc (no GPU needed, nothing runs); ptxas warns on register spills.
# Usage: tests/gpu/tile/compile_check.sh   (CUDA=/usr/local/cuda by default; BUILD=build-tile)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-tile}
NVCC="$CUDA/bin/nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I$ROOT/device"
mkdir -p "$BUILD"
cd "$ROOT"
echo "nvcc: $($CUDA/bin/nvcc --version | tail -1)"
$NVCC -Xptxas -warn-spills -c tests/gpu/tile/test_tile.cu -o "$BUILD/test_tile.o"
echo "ok: tests/gpu/tile/test_tile.cu"
$NVCC -Xptxas -warn-spills -c tests/gpu/tile/test_block_gemm.cu -o "$BUILD/test_block_gemm.o"
echo "ok: tests/gpu/tile/test_block_gemm.cu"
$NVCC -Xptxas -warn-spills -c tests/gpu/tile/test_wgmma.cu -o "$BUILD/test_wgmma.o"
echo "ok: tests/gpu/tile/test_wgmma.cu"
# The prototype must also keep its wgmma batches asynchronous: ptxas reports C7513 when it serializes them.
$NVCC -Xptxas -v,-warn-spills -c tests/gpu/tile/attention_wgmma_proto.cu -o "$BUILD/attention_wgmma_proto.o" 2>"$BUILD/attention_wgmma_proto.ptxas"
if grep -q C7513 "$BUILD/attention_wgmma_proto.ptxas"; then
  grep C7513 "$BUILD/attention_wgmma_proto.ptxas"
  echo "FAILED: ptxas serializes the prototype's wgmma (C7513)"
  exit 1
fi
echo "ok: tests/gpu/tile/attention_wgmma_proto.cu (no wgmma serialization)"
$NVCC -Xptxas -warn-spills -c tests/gpu/tile/test_topk.cu -o "$BUILD/test_topk.o"
echo "ok: tests/gpu/tile/test_topk.cu"
$NVCC -Xptxas -warn-spills -c tests/gpu/tile/test_reduce_combine.cu -o "$BUILD/test_reduce_combine.o"
echo "ok: tests/gpu/tile/test_reduce_combine.cu"
# Each header on its own (include-what-you-use).
for header in device/solder/tile/*.cuh; do
  printf '#include <solder/tile/%s>\n' "$(basename "$header")" > "$BUILD/tile_header_check.cu"
  $NVCC -c "$BUILD/tile_header_check.cu" -o "$BUILD/tile_header_check.o"
done
echo "ok: every header of device/solder/tile compiles alone"
echo "compile_check: all passed"
