#!/usr/bin/env bash
# Rewrites the golden files of tests/unit/e2e/golden_test.cpp and tests/unit/driver/steps_test.cpp from the current build (${SOLDER_BIN:-build/solder}):
# the generated CUDA (`emit --cuda --small`) and the fused Kernel IR (`print --after fuse --small`)
# of each pinned example, and the CUDA of the masked examples over several key tiles (S = 256). Review `git diff tests/golden` before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
examples=$(grep -o 'kGoldenExamples\[\] = {[^}]*}' tests/unit/e2e/golden_test.cpp | grep -o '"[a-z_0-9]*"' | tr -d '"')
mkdir -p tests/golden
for name in $examples; do
  ${SOLDER_BIN:-build/solder} emit --cuda --small "examples/$name.sol" > "tests/golden/$name.cu"
  ${SOLDER_BIN:-build/solder} print --after fuse --small "examples/$name.sol" > "tests/golden/$name.kir"
  echo "tests/golden/$name.cu, tests/golden/$name.kir"
done
masked=$(grep -o 'kGoldenMaskedExamples\[\] = {[^}]*}' tests/unit/e2e/golden_test.cpp | grep -o '"[a-z_0-9]*"' | tr -d '"')
for name in $masked; do
  ${SOLDER_BIN:-build/solder} emit --cuda --small --dim S=256 --dim D=64 "examples/$name.sol" > "tests/golden/$name.s256.cu"
  echo "tests/golden/$name.s256.cu"
done
defaults=$(grep -o 'kGoldenDefaultExamples\[\] = {[^}]*}' tests/unit/e2e/golden_test.cpp | grep -o '"[a-z_0-9]*"' | tr -d '"')
for name in $defaults; do
  ${SOLDER_BIN:-build/solder} emit --cuda "examples/$name.sol" > "tests/golden/$name.default.cu"
  echo "tests/golden/$name.default.cu"
done
# The dumps of the compile's named steps (tests/unit/driver/steps_test.cpp) at the default sizes.
mkdir -p tests/golden/steps
step_examples=$(grep -o 'kStepGoldenExamples\[\] = {[^}]*}' tests/unit/driver/steps_test.cpp | grep -o '"[a-z_0-9]*"' | tr -d '"')
steps=$(grep -o 'kStepGoldenSteps\[\] = {[^}]*}' tests/unit/driver/steps_test.cpp | grep -o '"[a-z_0-9]*"' | tr -d '"')
for name in $step_examples; do
  for step in $steps; do
    ${SOLDER_BIN:-build/solder} print --after "$step" --gpu "examples/$name.sol" > "tests/golden/steps/$name.$step"
    echo "tests/golden/steps/$name.$step"
  done
done
