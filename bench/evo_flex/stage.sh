#!/usr/bin/env bash
# Stages evo-flex's call (bench/evo_flex/call.sh) on the build machine (no GPU): bench/merged_stage.sh's mini
# root without device tests, plus every kernel of the call (the four evoformer cells and the head-dim-256
# checks) compiled ahead by NVRTC into kernels.tar.xz, so the device compiles nothing (bench/suite15/stage.sh
# says why DEST must be the path the device runs from).
#   bash bench/evo_flex/stage.sh /work/main/.devcarry/evo-flex      (JOBS=N NVRTC compiles at a time, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/evo_flex/stage.sh DEST}
DT=/nonexistent bash bench/merged_stage.sh "$dest" 2> >(grep -v "no device tests" >&2)
root=$PWD
cases() {
  bash bench/evo_flex/call.sh --checks | sed "s|^build/solder run --backend cuda \(.*\)\$|$root/build/solder bench \1 --compile-only|"
}
cd "$dest"
cases | bash "$root/bench/compile_ahead.sh"
du -sh "$dest" kernels.tar.xz
