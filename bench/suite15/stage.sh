#!/usr/bin/env bash
# Stages suite15's call (bench/suite15/call.sh) on the build machine (no GPU): bench/merged_stage.sh's mini
# root without device tests, plus every kernel of the call compiled ahead by NVRTC into kernels.tar.xz, so
# the device compiles nothing. The compile cache's key holds the NVRTC version, the device headers' digest
# and the include paths (the CuTe folder as $PWD/../cutlass spells it there), so DEST must be the path the
# device runs from (the device tool copies the checkout to the same path: /work/main/.devcarry/NAME).
#   SOLDER_CUTLASS_INCLUDE is not needed: DEST/../cutlass must hold the CuTe headers (.devcarry/cutlass).
#   bash bench/suite15/stage.sh /work/main/.devcarry/suite15      (JOBS=N NVRTC compiles at a time, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/suite15/stage.sh DEST}
DT=/nonexistent bash bench/merged_stage.sh "$dest" 2> >(grep -v "no device tests" >&2)
root=$PWD
cases() {   # every case of the call's spots files, as suites.py --compile-only lines
  grep -hv '^\s*\(#\|$\)' bench/suite15/suite15.spots bench/suite15/evoformer.spots |
    while read -r tag suite re rest; do
      python3 bench/suites.py --suite "$suite" --cases "$re" --solder-commands --compile-only --solder "$root/build/solder"
    done
  echo "$root/build/solder bench bench/programs/bf16_rowscale_gemm.sol --dim T=8192 --dim HID=8192 --dim N=8192 --compile-only"
  echo "$root/build/solder bench bench/programs/fp8_rowscale_gemm.sol --dim M=8192 --dim N=8192 --dim K=8192 --compile-only"
}
cd "$dest"
cases | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
