#!/usr/bin/env bash
# Stages an ffn-tiles call (issue 15, nineteenth session) on the build machine (no GPU): bench/merged_stage.sh's
# mini root without device tests, plus every kernel of the SPOTS file's Solder lines compiled ahead by NVRTC
# (each line's ENV words, SOLDER_GEMM_TILE=..., prefixed as merged_call.sh does) into kernels.tar.xz, so the
# device compiles nothing; call 2's H200 description (bench/results/h200/ffn-tiles-raw/hardware-h200.json) goes
# into DEST too. The compile cache's key holds the include paths ($PWD/../cutlass there), so DEST must be the path
# the device runs from (/work/main/.devcarry/NAME), with the CuTe headers in DEST/../cutlass.
#   bash bench/ffn_tiles/stage.sh DEST SPOTS          (JOBS=N NVRTC compiles at a time, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/ffn_tiles/stage.sh DEST SPOTS}
spots=${2:?usage: bench/ffn_tiles/stage.sh DEST SPOTS}
DT=/nonexistent bash bench/merged_stage.sh "$dest" 2> >(grep -v "no device tests" >&2)
root=$PWD
cp bench/results/h200/ffn-tiles-raw/hardware-h200.json "$dest/"   # call 2: SOLDER_HARDWARE=hardware-h200.json (merged_stage.sh leaves results/ out)
cases() {   # every Solder step of the spots file, as a --compile-only line with its ENV words first
  grep -v '^\s*\(#\|$\)' "$spots" | while read -r tag suite re peers plimit envs; do
    python3 bench/suites.py --suite "$suite" --cases "$re" --solder-commands --compile-only --solder "$root/build/solder" |
      sed "s|^|${envs:+$envs }|"
  done
}
cd "$dest"
cases | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
