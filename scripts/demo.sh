#!/usr/bin/env bash
# The main job: install what is needed, build, then compile and run a few example programs at their
# small sizes, verifying each against the float64 reference (on the GPU when one is present, else
# on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
for example in softmax vanilla causal gated_ffn moe_routing variance; do
  file="examples/$example.sol"
  [ -f "$file" ] || continue
  echo "== solder run --small $file"
  build/solder run --small "$file"
done
