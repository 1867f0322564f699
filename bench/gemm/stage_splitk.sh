#!/usr/bin/env bash
# Stages bench/gemm/device_splitk.sh's inputs into DEST (default /work/main/.devcarry/gemm-splitk):
# the device test and benchmark (built by compile_check.sh into BUILD), the solder binary (SOLDER_BIN,
# default build/solder) with its NVRTC kernel cache for the two examples (filled here with
# `solder bench --compile-only --no-fuse`), the examples, peer.py, and a trimmed CuTe include tree.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${DEST:-/work/main/.devcarry/gemm-splitk}
BUILD=${BUILD:-$ROOT/build-gemm}
SOLDER_BIN=${SOLDER_BIN:-$ROOT/build/solder}
CUTLASS=${SOLDER_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')}
rm -rf "$DEST" && mkdir -p "$DEST/bin" "$DEST/bench/gemm" "$DEST/examples" "$DEST/kernel-cache"
cp "$BUILD/test_sm90_gemm" "$BUILD/bench_gemm" "$SOLDER_BIN" "$DEST/bin/"
strip "$DEST/bin/solder" || true
cp "$(g++ -print-file-name=libgomp.so.1)" "$DEST/bin/"
cp "$ROOT/bench/gemm/peer.py" "$ROOT/bench/gemm/device_splitk.sh" "$DEST/bench/gemm/"
cp "$ROOT/examples/ffn.sol" "$DEST/examples/"
# Single M = 128 products (f16, the weight K x N as in ffn): ffn's second GEMM (N 3072, K 8192), an
# N 4096, K 11008 one, and ffn's first (N 8192, K 3072).
for nk in "3072 8192" "4096 11008" "8192 3072"; do
  set -- $nk
  printf 'program skinny_%s\ndim M = 128, N = %s, K = %s\nsmall M = 16, N = 64, K = 256\nin h[M, K] : f16\nin d[K, N] : f16 ~ normal(0, 0.02)\nout e[m, n] : f16 = sum(k) h[m, k] * d[k, n]\n' "$1" "$1" "$2" > "$DEST/examples/skinny_$1.sol"
done
cp -r "$CUTLASS" "$DEST/cutlass" && rm -rf "$DEST/cutlass/cutlass/gemm" "$DEST/cutlass/cutlass/epilogue" "$DEST/cutlass/cutlass/conv"
for f in "$DEST"/examples/*.sol; do
  SOLDER_CUTLASS_INCLUDE="$CUTLASS" SOLDER_CACHE_DIR="$DEST/kernel-cache" "$SOLDER_BIN" bench --compile-only --no-fuse "$f"
done
du -sh "$DEST" "$DEST"/*
