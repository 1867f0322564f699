#!/usr/bin/env bash
# Compiles a device call's kernels ahead on the build machine (no GPU), for the stage scripts
# (bench/suite15/stage.sh, bench/attention/exp_poly_stage.sh, bench/ffn_tiles/stage.sh, bench/big_gemm/stage.sh,
# bench/evo_flex/stage.sh): reads one command per line on stdin (`solder bench ... --compile-only`, ENV words
# first where a line has them) and runs them, JOBS (default 2) at a time, from the staged root it is run in,
# with the CuTe headers in ../cutlass and the compile cache in .cache/kernels; then packs the cache into
# kernels.tar.xz there (the call unpacks it into its own .cache) and logs the commands' output in
# compile-ahead.log. The cache's key holds the include paths, so run it from the folder the device runs from.
#   some_commands | (cd DEST && bash ROOT/bench/compile_ahead.sh)
set -uo pipefail
rm -rf .cache
SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels \
  xargs -d '\n' -P "${JOBS:-2}" -n 1 sh -c > compile-ahead.log 2>&1
echo "stage: $(grep -c 'compiled in' compile-ahead.log) programs compiled, $(ls .cache/kernels 2>/dev/null | wc -l) kernels;" \
  "errors: $(grep -ci 'error' compile-ahead.log)"
tar cJf kernels.tar.xz -C .cache kernels && rm -rf .cache
