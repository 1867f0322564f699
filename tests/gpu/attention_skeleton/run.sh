#!/usr/bin/env bash
# Builds and runs the attention skeleton's device tests (test_sm90_attention.cu, and the dual mode's
# test_sm90_attention_dual.cu) on an sm_90a GPU.
# Usage: tests/gpu/attention_skeleton/run.sh [SEED]   (CUDA, BUILD, SOLDER_CUTLASS_INCLUDE as for compile_check.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build-attn}
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" test
OUT_BIN=1 BUILD=$BUILD bash "$ROOT/tests/gpu/attention_skeleton/compile_check.sh" dual
"$BUILD/test_sm90_attention" "${1:-2026}"
"$BUILD/test_sm90_attention_dual" "${1:-2026}"
