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
rm -rf .cache
cases | SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels \
  xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c > compile-ahead.log 2>&1 || true
echo "stage: $(grep -c 'compiled in' compile-ahead.log) programs compiled, $(ls .cache/kernels | wc -l) kernels;" \
  "errors: $(grep -ci 'error' compile-ahead.log)"
tar cJf kernels.tar.xz -C .cache kernels && rm -rf .cache
du -sh "$dest" kernels.tar.xz
