#!/usr/bin/env bash
# Builds and runs the attention skeleton's device tests (test_sm90_attention.cu, the dual mode's
# test_sm90_attention_dual.cu, and test_sm90_exp2_poly.cu: the row state's exponential on the FMA pipe) on an
# sm_90a GPU. EXP2_EMULATED=K builds the skeleton's tests with K of 16 weights on the FMA pipe.
# Usage: tests/gpu/attention_skeleton/run.sh [SEED]   (CUDA, BUILD, SOLDER_CUTLASS_INCLUDE as for compile_check.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build-attn}
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" test
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" dual
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" exp2
"$BUILD/test_sm90_exp2_poly"
"$BUILD/test_sm90_attention" "${1:-2026}"
"$BUILD/test_sm90_attention_dual" "${1:-2026}"
