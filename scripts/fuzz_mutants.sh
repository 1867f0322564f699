#!/usr/bin/env bash
# A long run of the front end's mutation fuzzer (tests/unit/ir/mutation_fuzz_test.cpp): mutants of
# every example must parse and verify, or fail with a located error; never crash.
#
#   scripts/fuzz_mutants.sh [MUTANTS] [SEED] [FIRST]   (defaults: 20000 mutants, seed 1, from 0)
#
# FIRST replays from mutant FIRST on (`scripts/fuzz_mutants.sh 11001 2 11000` tries mutant 11000 of
# seed 2 alone).
# Needs build/solder_unit_tests (scripts/setup.sh or `cmake --build build --target solder_unit_tests`).
# Prints the counts (verified, parse errors, verifier errors, failures, mutation kinds) and exits 1
# when any mutant failed; the failing mutants are printed in full.
set -euo pipefail
cd "$(dirname "$0")/.."
mutants=${1:-20000}
seed=${2:-1}
first=${3:-0}
binary=${SOLDER_UNIT_TESTS:-build/solder_unit_tests}
if [[ ! -x $binary ]]; then
  echo "error: $binary not found; build it first (cmake --build build --target solder_unit_tests)" >&2
  exit 2
fi
last=$(mktemp)
trap 'rm -f "$last"' EXIT
set +e
output=$(SOLDER_FUZZ_MUTANTS=$mutants SOLDER_FUZZ_SEED=$seed SOLDER_FUZZ_FIRST=$first SOLDER_FUZZ_LAST=$last \
  "$binary" --gtest_filter='MutationFuzz.EveryMutantVerifiesOrFailsWithALocatedError' 2>&1)
status=$?
set -e
# The counts, and every failing mutant (gtest's own lines left out).
grep -v '^\[' <<<"$output" || true
if [[ $status -ne 0 ]]; then
  if [[ $status -gt 128 ]]; then
    echo "fuzz_mutants: the fuzzer died (signal $((status - 128))) on this mutant:"
    cat "$last"
  fi
  echo "fuzz_mutants: FAILED (exit $status)"
  exit 1
fi
echo "fuzz_mutants: ok"
