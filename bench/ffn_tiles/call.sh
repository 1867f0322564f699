#!/usr/bin/env bash
# ffn-tiles' device call (issue 15, nineteenth session), a wrapper around bench/merged_call.sh from a root
# staged by bench/ffn_tiles/stage.sh: unpacks the kernels compiled ahead (kernels.tar.xz) into the compile
# cache, then runs merged_call.sh with SPOTS (and VERIFY, ROUNDS, DEADLINE as given) into $OUT/mc, and
# copies its r.tgz and the call's log to $OUT. No device tests, no tests/gpu/run.sh (planner-only change).
# LIMIT (seconds, default 120) stops merged_call.sh from outside, so r.tgz (packed after every step) is still
# copied inside the device tool's timeout; give DEADLINE about LIMIT + 60 so that the Solder steps (which start
# only with 60 s of DEADLINE left) run until LIMIT.
#   cd ROOT && SPOTS=bench/ffn_tiles/call1.spots ROUNDS=2 LIMIT=120 DEADLINE=180 bash bench/ffn_tiles/call.sh
#   DRY_RUN=1 ...: merged_call.sh's commands, no GPU
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
if [ "${DRY_RUN:-0}" != 1 ] && [ -f kernels.tar.xz ]; then
  python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    echo "$(ls .cache/kernels | wc -l) cached kernels unpacked"
fi
OUT=/tmp/mc DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="${PEER_ARGS---compile-mode default}" \
  timeout "${LIMIT:-120}" bash bench/merged_call.sh 2>&1 | tee "$O/call.log"
[ -f /tmp/mc/r.tgz ] && cp /tmp/mc/r.tgz "$O/r.tgz"
exit 0
