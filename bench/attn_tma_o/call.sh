#!/usr/bin/env bash
# attn-tma-o's device call (issue 17, twenty-second session), a wrapper around bench/merged_call.sh, from the root
# bench/big_gemm/stage.sh stages with this folder's spots and checks (CuTe headers in ../cutlass, every kernel
# compiled ahead in kernels.tar.xz; the attention device test built with OUT_BIN=1 in DT):
#   DT=/work/dt-attn-tma-o bash bench/big_gemm/stage.sh /work/main/.devcarry/attn-tma-o bench/attn_tma_o/ab.spots bench/attn_tma_o/verify.txt
#   cd .devcarry/attn-tma-o && LIMIT=140 bash bench/attn_tma_o/call.sh          (DRY_RUN=1: the commands, no GPU)
#   1. the attention device test filtered to the TMA-store cases (label "Tm"), under DT_SECONDS (default 45);
#   2. `solder run --backend cuda` (float64 reference) of each line of bench/attn_tma_o/verify.txt through
#      bench/verify_lines.sh, 4 at a time, each under VERIFY_SECONDS (default 30), into $OUT/checks.tgz;
#   3. merged_call.sh with bench/attn_tma_o/ab.spots (SOLDER_ATTN_O_STORE=tma against main's stores, cuDNN SDPA
#      beside each cell), ROUNDS (default 2) interleaved rounds, with what is left of LIMIT, into $OUT/r.tgz.
# $OUT: checks.tgz, r.tgz, call.log (the device test's lines in it).
. bench/call_prologue.sh

stamp "== 1. device test: bin/test_sm90_attention 2026 Tm ($(left) s left)"
if [ "$DRY" = 1 ]; then echo "timeout ${DT_SECONDS:-45} bin/test_sm90_attention 2026 Tm"
else
  timeout "${DT_SECONDS:-45}" bin/test_sm90_attention 2026 Tm 2>&1 | while IFS= read -r line; do stamp "   $line"; done
  stamp "   device test rc ${PIPESTATUS[0]}"
fi

stamp "== 2. checks: bench/attn_tma_o/verify.txt ($(left) s left)"
C=/tmp/attn-tma-o-checks; rm -rf "$C"; mkdir -p "$C"
OUT=$C DRY_RUN=$DRY PARALLEL=4 VERIFY_SECONDS=${VERIFY_SECONDS:-30} bash bench/verify_lines.sh bench/attn_tma_o/verify.txt
[ "$DRY" = 1 ] || tar czf "$O/checks.tgz" -C "$C" .

stamp "== 3. rounds: merged_call.sh bench/attn_tma_o/ab.spots ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left, a peers step with 30: its DEADLINE is
# what this call keeps for the rounds + 55, under an outer timeout of that
mc=$(( $(left) - 2 ))
OUT=/tmp/mc DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} PEER_ARGS="--reps 50" \
  DEADLINE=$(( mc + 55 )) SPOTS=bench/attn_tma_o/ab.spots timeout "$mc" bash bench/merged_call.sh
[ "$DRY" = 1 ] || { tar czf "$O/r.tgz" -C /tmp/mc r; head -40 /tmp/mc/r/summary.md 2>/dev/null; }
stamp "== done ($(left) s left)"
