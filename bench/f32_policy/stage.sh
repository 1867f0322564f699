#!/usr/bin/env bash
# Stages f32-policy's device call (bench/f32_policy/call.sh) on the build machine (no GPU): bench/merged_stage.sh's
# mini root (DT: a folder of device tests built with OUT_BIN=1, e.g. test_sm90_gemm for its tf32 cases; none
# by default), plus every kernel of the call compiled ahead by NVRTC
# into kernels.tar.xz (bench/compile_ahead.sh; DEST must be the path the device runs from, the CuTe headers in
# DEST/../cutlass). F32_EXAMPLES: the examples call 1 verifies (small and paper size).
#   F32_EXAMPLES="..." bash bench/f32_policy/stage.sh /work/main/.devcarry/f32-policy
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/f32_policy/stage.sh DEST}
DT=${DT:-/nonexistent} bash bench/merged_stage.sh "$dest" 2> >(grep -v "no device tests" >&2)
root=$PWD
F=bench/tf32/f32mm.sol
cases() {
  for d in 64 1000 1024 4096 8192; do
    echo "$root/build/solder bench $F --dim M=$d --dim N=$d --dim K=$d --compile-only"
  done
  echo "SOLDER_F32_CONTRACT=f32 $root/build/solder bench $F --dim M=1024 --dim N=1024 --dim K=1024 --compile-only"
  echo "SOLDER_TF32_SPLIT=generic $root/build/solder bench $F --compile-only"
  echo "SOLDER_GEMM_CLUSTER=2x1 $root/build/solder bench $F --compile-only"
  for e in ${F32_EXAMPLES:-}; do
    echo "$root/build/solder bench examples/$e.sol --compile-only"
    echo "$root/build/solder bench examples/$e.sol --small --compile-only"
  done
}
cd "$dest"
cases | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
