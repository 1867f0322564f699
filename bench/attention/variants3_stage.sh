#!/usr/bin/env bash
# Stages bench/attention/variants3_call.sh's mini repository root on the build machine (no GPU): what
# epi_stage.sh stages (stripped build/solder, bin/test_sm90_attention gzipped, examples/, bench/ without
# results/, COMMIT), plus flex_max_autotune.jsonl, FlexAttention's max-autotune records of the twelfth
# session's calls 3 and 2-evo (the ratios' denominator; max-autotune compiles for minutes per cell).
#   bench/attention/variants3_stage.sh DEST BINDIR     (e.g. /work/main/.devcarry/attn-variants2 /tmp/av2_bin)
# BINDIR holds the device test, built with
#   OUT_BIN=1 BUILD=BINDIR bash tests/gpu/attention_skeleton/compile_check.sh test
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: variants3_stage.sh DEST BINDIR}
bash bench/attention/epi_stage.sh "$dest" "${2:?usage: variants3_stage.sh DEST BINDIR}"
calls=bench/results/h100/integrator-2026-11-27-s12
cat "$calls/call3/r/peers.jsonl" "$calls/call2-evo/r/peers.jsonl" | grep '"peer": *"flex"' > "$dest/flex_max_autotune.jsonl"
wc -l < "$dest/flex_max_autotune.jsonl"
du -sh "$dest"
