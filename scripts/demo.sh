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
# The same from Python (the package set up in build/venv by setup.sh), when it is there.
if [ -x build/venv/bin/python ] && build/venv/bin/python -c "import solder" >/dev/null 2>&1; then
  echo "== python: solder.compile(examples/softmax.sol, small) on NumPy"
  build/venv/bin/python - <<'PY'
import numpy as np, solder
k = solder.compile("examples/softmax.sol", small=True)
x = np.random.randn(*k.inputs[0][1]).astype(np.float32)
if k.device == "cpu":
    y = k(x)
    e = np.exp(x - x.max(axis=1, keepdims=True)); ref = e / e.sum(axis=1, keepdims=True)
    print(k, "max difference from NumPy:", float(abs(y - ref).max()))
else:
    print(k, "(GPU kernel: call it with torch or CuPy tensors)")
PY
fi
