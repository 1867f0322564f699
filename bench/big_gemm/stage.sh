#!/usr/bin/env bash
# Stages big-gemm's device calls (issue 15, nineteenth session) on the build machine (no GPU): bench/merged_stage.sh's
# mini root, plus every Solder kernel of the call's spots file compiled ahead by NVRTC into kernels.tar.xz (each
# spot line's ENV words included), so the device compiles nothing. The compile cache's key holds the include
# paths (the CuTe folder as $PWD/../cutlass spells it there): DEST must be the path the device runs from
# (/work/main/.devcarry/NAME), with DEST/../cutlass holding the CuTe headers.
#   DT=/nonexistent bash bench/big_gemm/stage.sh /work/main/.devcarry/big-gemm bench/big_gemm/call1.spots [VERIFY_FILE]
# (VERIFY_FILE: call.sh's lines, ENV words or -, then `solder run` arguments; their kernels compiled ahead too.)
# (DT: the device tests' folder for merged_stage.sh; JOBS=N NVRTC compiles at a time, default 2.)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/big_gemm/stage.sh DEST SPOTS [VERIFY_FILE]}; spots=${2:?usage: bench/big_gemm/stage.sh DEST SPOTS}
verify=${3:-}
bash bench/merged_stage.sh "$dest" 2> >(grep -v "no device tests" >&2)
root=$PWD
cases() {   # every spot line's solder commands, --compile-only, prefixed with the line's ENV words
  grep -v '^\s*\(#\|$\)' "$spots" | while read -r tag suite re peers plimit envs; do
    python3 bench/suites.py --suite "$suite" --cases "$re" --solder-commands --compile-only --solder "$root/build/solder" |
      sed "s|^|${envs:+$envs }|"
  done
  [ -n "$verify" ] && grep -v '^\s*\(#\|$\)' "$verify" | while read -r envs args; do
    [ "$envs" = - ] && envs=
    echo "${envs:+$envs }$root/build/solder bench $args --compile-only"
  done
  true
}
cd "$dest"
cases | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
