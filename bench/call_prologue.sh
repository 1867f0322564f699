# Sourced by the branch call scripts (big_gemm/, evo128/, s7_model/ call.sh) at their start, on the device from
# the staged root (bench/merged_stage.sh or a stage.sh), with the CuTe headers in ../cutlass. It sets
# O ($OUT, default /tmp/out), DRY ($DRY_RUN), the Solder environment (SOLDER_CUTLASS_INCLUDE, SOLDER_CACHE_DIR,
# SOLDER_COMMIT, LD_LIBRARY_PATH for bin/'s libgomp), `left` (seconds to LIMIT, default 124) and `stamp`
# (a line with the seconds since the start); tees the output into $O/call.log; prints the step-0 line (date,
# commit, GPU) and, outside a dry run, unpacks the staged binaries and the kernels compiled ahead.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
DRY=${DRY_RUN:-0}
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export SOLDER_COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD)
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s); LIMIT=${LIMIT:-124}; left() { echo $(( LIMIT - ($(date +%s) - start) )); }
[ "$DRY" = 1 ] || exec > >(tee -a "$O/call.log") 2>&1
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }

stamp "== 0. $(date -u +%FT%TZ) commit $SOLDER_COMMIT $([ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
if [ "$DRY" != 1 ]; then
  bash bench/unpack_staged.sh
  [ -f kernels.tar.xz ] && python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    stamp "   $(ls .cache/kernels | wc -l) cached kernels unpacked"
fi
