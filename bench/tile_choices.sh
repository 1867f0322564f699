#!/usr/bin/env bash
# The GEMM tiles the planner chooses for every product of every example, at the paper size (the
# example's own dims) and at every suite size (bench/suites.py): one line per kernel that reports a
# GEMM skeleton tile (`solder emit --cuda --report`) and per fused product whose row tile the cost model
# chose (`solder fuse --gpu`). To list what a cost
# model change moves, run it before and after and diff the two files:
#   bench/tile_choices.sh build/solder > before.txt; (change, rebuild); bench/tile_choices.sh build/solder > after.txt
#   diff before.txt after.txt
# Runs on the build machine (no GPU): emit only plans and writes CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
solder=${1:-build/solder}
{
  for f in examples/*.sol; do echo "$f"; done
  python3 bench/suites.py --solder-commands --suite all --solder X --out /dev/null |
    sed -e 's/^X bench //' -e 's/ --json >>.*$//'
} | while IFS= read -r args; do
  # shellcheck disable=SC2086
  "$solder" emit --cuda --report $args 2>&1 |
    grep -E 'GEMM skeleton' | sed -E -e 's/; [0-9.]+ us predicted.*$//' -e "s|^|$args :: |"
  # The fused planner's row tiles of tensor-core products (FusionParams::product_rows_from_cost_model).
  "$solder" fuse --gpu $args 2>&1 | grep -oE 'row tile [0-9]+ of [^:]+: the cost model.s BM for [^(]*' | sed -e "s|^|$args :: |"
done
