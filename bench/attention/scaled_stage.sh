#!/usr/bin/env bash
# Stages bench/attention/scaled_call.sh's mini repository root on the build machine (no GPU): what
# epi_stage.sh stages (stripped build/solder, bin/test_sm90_attention gzipped, examples/, bench/ without
# results/, COMMIT).
#   bench/attention/scaled_stage.sh DEST BINDIR     (e.g. /work/main/.devcarry/variants3 /work/dt-variants3)
# BINDIR holds the device test, built with
#   OUT_BIN=1 BUILD=BINDIR bash tests/gpu/attention_skeleton/compile_check.sh test
set -euo pipefail
cd "$(dirname "$0")/../.."
bash bench/attention/epi_stage.sh "${1:?usage: scaled_stage.sh DEST BINDIR}" "${2:?usage: scaled_stage.sh DEST BINDIR}"
