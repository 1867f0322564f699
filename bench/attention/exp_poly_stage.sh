#!/usr/bin/env bash
# Stages exp-poly's device call (bench/attention/exp_poly_call.sh) on the build machine (no GPU): merged_stage.sh's
# mini root with the device tests of DT (test_sm90_attention and test_sm90_attention_dual built with
# EXP2_EMULATED=4, test_sm90_exp2_poly), plus every kernel of the call (exp_poly.spots' lines with their knobs,
# and the verification's at SOLDER_ATTN_EXP2_EMU=4) compiled ahead by NVRTC into kernels.tar.xz, so that the
# device compiles nothing. The compile cache's key holds the include paths, so DEST must be the path the device
# runs from (/work/main/.devcarry/NAME) and DEST/../cutlass must hold the CuTe headers.
#   DT=/work/dt-exp-poly bash bench/attention/exp_poly_stage.sh /work/main/.devcarry/exp-poly   (JOBS=2)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/attention/exp_poly_stage.sh DEST}
bash bench/merged_stage.sh "$dest"
root=$PWD
spots=bench/attention/exp_poly.spots
cases() {   # every solder command of the call, as --compile-only lines with their knobs
  grep -v '^\s*\(#\|$\)' "$spots" | while read -r tag suite re peers plimit envs; do
    python3 bench/suites.py --suite "$suite" --cases "$re" --solder-commands --compile-only --solder "$root/build/solder" |
      sed "s|^|${envs:+$envs }|"
  done
  python3 bench/suites.py --suite attention --cases '^((vanilla|gqa|alibi|diff_attn)-d64-s1024|(vanilla|diff_attn)-d64-s4096)$' \
    --solder-commands --compile-only --solder "$root/build/solder" | sed 's|^|SOLDER_ATTN_EXP2_EMU=4 |'
}
cd "$dest"
cases | sort -u | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
