#!/usr/bin/env bash
# ffn-tiles' device call (issue 15, nineteenth session), a wrapper around bench/merged_call.sh from a root
# staged by bench/ffn_tiles/stage.sh: unpacks the kernels compiled ahead (kernels.tar.xz) into the compile
# cache, then runs merged_call.sh with SPOTS (and VERIFY, ROUNDS, DEADLINE as given) into $OUT/mc, and
# copies its r.tgz and the call's log to $OUT. No device tests, no tests/gpu/run.sh (planner-only change).
# LIMIT (seconds from the start, default 120) stops merged_call.sh from outside, so r.tgz (packed after every
# step) is still copied inside the device tool's timeout; merged_call.sh's DEADLINE is set 58 s beyond it, so
# that its Solder steps (which start only with 60 s of DEADLINE left) run until LIMIT.
#   cd ROOT && SPOTS=bench/ffn_tiles/call1.spots ROUNDS=2 LIMIT=115 bash bench/ffn_tiles/call.sh
#   (call 1 ran with DEADLINE=175 and merged_call.sh alone under LIMIT, before this form)
#   DRY_RUN=1 ...: merged_call.sh's commands, no GPU
# VERIFY (a regular expression on bench/suites.py case ids) is run here, before merged_call.sh and not by it, with
# VERIFY_ENV's words (e.g. SOLDER_HARDWARE=hardware-h200.json) in its environment: `solder run --backend cuda` of
# each case at its suite size against the float64 reference, VERIFY_JOBS (default 8) at a time, each under
# VERIFY_TIMEOUT seconds (default 60), into $OUT/verify.txt. (Call 2 ran before build/solder.xz was unpacked
# here, so its verification found no binary: FAILED (127).)
set -uo pipefail
t0=$(date +%s)
O=${OUT:-/tmp/out}; mkdir -p "$O"
rm -rf /tmp/mc   # a warm machine may keep an earlier call's records there
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
if [ "${DRY_RUN:-0}" != 1 ] && [ -f kernels.tar.xz ]; then
  python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    echo "$(ls .cache/kernels | wc -l) cached kernels unpacked"
fi
[ "${DRY_RUN:-0}" = 1 ] || bash bench/unpack_staged.sh   # build/solder.xz (merged_call.sh unpacks it too, later)
if [ -n "${VERIFY:-}" ]; then
  cmds=$(python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout "${VERIFY_TIMEOUT:-60}" |
    sed "s|^|${VERIFY_ENV:+$VERIFY_ENV }|")
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "== verify"; echo "$cmds"
  else
    echo "== verify ($(echo "$cmds" | wc -l) programs${VERIFY_ENV:+, $VERIFY_ENV})"
    echo "$cmds" | xargs -d '\n' -P "${VERIFY_JOBS:-8}" -I{} sh -c '{} > /dev/null 2>&1 && echo "verified {}" || echo "FAILED ($?) {}"' \
      > "$O/verify.txt"
    echo "   $(grep -c ^verified "$O/verify.txt") of $(wc -l < "$O/verify.txt") verified"; grep ^FAILED "$O/verify.txt"
  fi
fi
unset VERIFY
left=$(( ${LIMIT:-120} - ($(date +%s) - t0) ))   # LIMIT counts from the start, verification included
OUT=/tmp/mc DEVICE_TESTS="" RUN_SH=0 PEER_ARGS="${PEER_ARGS---compile-mode default}" DEADLINE=$((left + 58)) \
  timeout "$left" bash bench/merged_call.sh 2>&1 | tee "$O/call.log"
[ -f /tmp/mc/r.tgz ] && cp /tmp/mc/r.tgz "$O/r.tgz"
exit 0
