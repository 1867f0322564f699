#!/usr/bin/env bash
# The exp-poly branch's device call (issue 17, nineteenth session; bench/NOTES.md "exp-poly"), from a root staged
# by bench/merged_stage.sh (DT: the device tests built with EXP2_EMULATED=4, test_sm90_exp2_poly among them)
# plus the call's kernels compiled ahead into kernels.tar.xz (bench/suite15/stage.sh's way), CuTe in ../cutlass:
#   1. the device tests and the verification at once (correctness only, nothing timed meanwhile; the spots'
#      kernels compile beside them, cache hits when staged):
#      bin/test_sm90_exp2_poly (every f32 against exp2 in double), the attention skeleton's hd64 cases and the
#      dual mode's, both built with 4 of 16 weights on the FMA pipe; `solder run --backend cuda` against the
#      float64 reference of VERIFY (suites.py case ids) with SOLDER_ATTN_EXP2_EMU=$VERIFY_EMU (default 4);
#   2. bench/merged_call.sh on SPOTS (default bench/attention/exp_poly.spots), ROUNDS (default 2) interleaved,
#      its DEADLINE set past the outer limit so that its 60-s guard never skips a round-2 step: the outer
#      `timeout` is the limit, and merged_call.sh packs r.tgz after every step.
# Everything goes to $OUT/r (r.tgz packed after each phase). Usage, from the staged root:
#   OUT=/tmp/mc timeout -k 3 120 bash bench/attention/exp_poly_call.sh; cp /tmp/mc/r.tgz $OUT/
#   DRY_RUN=1 bash bench/attention/exp_poly_call.sh        (prints the commands; no GPU)
set -uo pipefail
O=${OUT:-/tmp/mc}; mkdir -p "$O/r"
DRY=${DRY_RUN:-0}
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
VERIFY=${VERIFY:-'^((vanilla|gqa|alibi|diff_attn)-d64-s1024|(vanilla|diff_attn)-d64-s4096)$'}
VERIFY_EMU=${VERIFY_EMU:-4}
DEVICE_TESTS=${DEVICE_TESTS-exp2_poly:18 attention:18:d64 attention_dual:18}

stamp "== 0. $(date -u +%FT%TZ) commit $(cat COMMIT 2>/dev/null)"
if [ "$DRY" != 1 ]; then
  bash bench/unpack_staged.sh
  [ -f kernels.tar.xz ] && python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    stamp "   $(ls .cache/kernels | wc -l) cached kernels unpacked"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$O/r/device.txt"
fi

stamp "== 1. device tests and verification at once, the spots' kernels compiling meanwhile (cache hits when staged)"
SPOTS=${SPOTS:-bench/attention/exp_poly.spots}
compile_cmds() {
  grep -v '^\s*\(#\|$\)' "$SPOTS" | while read -r tag suite re peers plimit envs; do
    python3 bench/suites.py --suite "$suite" --cases "$re" --solder-commands --compile-only --timeout 120 | sed "s|^|${envs:+$envs }|"
  done
}
if [ "$DRY" = 1 ]; then compile_cmds | sed 's|$| \&|'
else compile_cmds | xargs -d '\n' -P 8 -n 1 sh -c > "$O/r/compile-ahead.log" 2>&1 &
fi
for t in $DEVICE_TESTS; do
  IFS=: read -r n s arg <<< "$t"; f=$n${arg:+-$arg}
  if [ "$DRY" = 1 ]; then echo "timeout $s bin/test_sm90_$n 2026${arg:+ $arg} > r/dt-$f.txt &"; continue; fi
  ( timeout "$s" bin/test_sm90_"$n" 2026 $arg > "$O/r/dt-$f.txt" 2>&1; echo "rc $?" >> "$O/r/dt-$f.txt" ) &
done
if [ "$DRY" = 1 ]; then
  python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout 30 | sed "s|^|SOLDER_ATTN_EXP2_EMU=$VERIFY_EMU |"
else
  python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout 30 |
    xargs -d '\n' -P 6 -I{} sh -c "SOLDER_ATTN_EXP2_EMU=$VERIFY_EMU {} > /dev/null 2>&1 && echo 'verified K=$VERIFY_EMU {}' || echo \"FAILED (\$?) K=$VERIFY_EMU {}\"" \
      > "$O/r/verify.txt" &
  wait
  for f in "$O"/r/dt-*.txt; do stamp "   $(basename "$f"): $(grep -c '^OK' "$f") OK, $(grep -c '^FAIL' "$f") FAIL, $(tail -n 2 "$f" | tr '\n' ' ')"; done
  grep -h '^FAIL' "$O"/r/dt-*.txt | head -5
  stamp "   verify: $(grep -c ^verified "$O/r/verify.txt") of $(wc -l < "$O/r/verify.txt") verified"; grep ^FAILED "$O/r/verify.txt"
  tar czf "$O/r.tgz" -C "$O" r
fi

stamp "== 2. the A/B"
OUT=$O DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} PEER_ARGS="--compile-mode default" DEADLINE=400 \
  SPOTS=$SPOTS bash bench/merged_call.sh
stamp "== done"
