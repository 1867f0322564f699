#!/usr/bin/env bash
# alibi's device call (issue 17, twenty-first session), a wrapper around bench/merged_call.sh, from the root
# bench/big_gemm/stage.sh stages with this folder's spots and checks (CuTe headers in ../cutlass, the kernels
# compiled ahead in kernels.tar.xz):
#   cd .devcarry/alibi && LIMIT=124 bash bench/alibi/call.sh          (DRY_RUN=1: the commands, no GPU)
#   1. (before any timing, together) the attention skeleton's device test filtered by DT_FILTER (default
#      "affine": every affine-score case, the column term by the tensor cores among them) under DT_SECONDS
#      (default 40), and `solder run --backend cuda` (float64 reference) of each line of bench/alibi/verify.txt,
#      3 at a time, each under VERIFY_SECONDS (default 35), into $OUT/checks.tgz;
#   2. merged_call.sh with bench/alibi/ab.spots (Solder only), ROUNDS (default 2) interleaved rounds, under
#      MC_SECONDS (default 30), into $OUT/r.tgz;
#   3. merged_call.sh with bench/alibi/flex.spots (FlexAttention max-autotune beside Solder), one round, with
#      what is left of LIMIT, into $OUT/flex.tgz.
# $OUT: checks.tgz, flex.tgz, r.tgz, call.log.
. bench/call_prologue.sh
C=/tmp/alibi-checks; rm -rf "$C"; mkdir -p "$C"
stamp "== 1. checks: device test '${DT_FILTER:=affine}', verify bench/alibi/verify.txt ($(left) s left)"
if [ "$DRY" = 1 ]; then echo "timeout ${DT_SECONDS:-25} bin/test_sm90_attention 2026 '$DT_FILTER' > dt-attention.txt &"
else (timeout "${DT_SECONDS:-25}" bin/test_sm90_attention 2026 "$DT_FILTER" > "$C/dt-attention.txt" 2>&1; echo "rc $?" >> "$C/dt-attention.txt") &
  dt_pid=$!; fi
n=0
while read -r envs args; do
  n=$((n + 1)); [ "$envs" = - ] && envs=
  echo "env $envs timeout ${VERIFY_SECONDS:-35} build/solder run --backend cuda $args" > "$C/verify-$n.sh"
done < <(grep -v '^\s*\(#\|$\)' bench/alibi/verify.txt)
if [ "$DRY" = 1 ]; then cat "$C"/verify-*.sh
else
  ls "$C"/verify-*.sh | xargs -P 3 -n 1 bash -c 'if bash "$0" > "${0%.sh}.txt" 2>&1; then echo "verified $(basename "$0"): $(cat "$0") $(grep -io "[^,;]*err[^,;]*" "${0%.sh}.txt" | head -2 | tr "\n" " ")";
    else echo "FAILED ($?) $(basename "$0"): $(cat "$0")"; fi' | tee -a "$C/verify.txt"
  wait "$dt_pid"
  stamp "   device test: $(grep -c '^OK ' "$C/dt-attention.txt") OK, $(grep -c '^FAIL' "$C/dt-attention.txt") FAIL; $(tail -n2 "$C/dt-attention.txt" | tr '\n' ' ')"
  tar czf "$O/checks.tgz" -C "$C" .
fi

stamp "== 2. rounds: merged_call.sh bench/alibi/ab.spots ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left: its DEADLINE is MC_SECONDS + 65
mc=${MC_SECONDS:-30}
OUT=/tmp/mc1 DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} DEADLINE=$(( mc + 65 )) SPOTS=bench/alibi/ab.spots \
  timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/r.tgz" -C /tmp/mc1 r; cat /tmp/mc1/r/summary.md 2>/dev/null | head -40; }

stamp "== 3. FlexAttention: merged_call.sh bench/alibi/flex.spots ($(left) s left)"
# (its DEADLINE just over the outer timeout: the Solder steps run only with 60 s left, Flex's with 30, under
# a timeout of what is left − 5, so a cut Flex step still has its finished cells' records moved and packed)
mc=$(( $(left) - 3 )); [ "$DRY" = 1 ] && mc=80
OUT=/tmp/mc2 DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=1 DEADLINE=$(( mc + 2 )) SPOTS=bench/alibi/flex.spots \
  timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/flex.tgz" -C /tmp/mc2 r; cat /tmp/mc2/r/summary.md 2>/dev/null | head -20; }
stamp "== done ($(left) s left)"
