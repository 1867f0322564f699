#!/usr/bin/env bash
# Builds and runs the GEMM skeleton's device tests (test_sm90_gemm.cu, test_sm90_gemm_prologue.cu,
# test_sm90_gemm_rows.cu, test_sm90_gemm_ranges.cu) on an sm_90a GPU.
# Usage: tests/gpu/gemm/run.sh [SEED]   (CUDA, BUILD, SOLDER_CUTLASS_INCLUDE as for compile_check.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gemm}
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/gemm/compile_check.sh" test
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/gemm/compile_check.sh" ranges
"$BUILD/test_sm90_gemm" "${1:-2026}"
"$BUILD/test_sm90_gemm_prologue" "${1:-2026}"
"$BUILD/test_sm90_gemm_rows" "${1:-2026}"
"$BUILD/test_sm90_gemm_ranges" "${1:-2026}"
