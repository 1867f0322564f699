#!/usr/bin/env bash
# One device call for a session's merged tree: every example verified through the CUDA backend at small
# and paper sizes (tests/gpu/run.sh), the cases the session changed timed against the peers in the same
# call (bench/whole_session.sh), then the Python package and the torch backend on the GPU
# (tests/gpu/torch.sh). Each part writes into OUTDIR as it goes, so a call cut short keeps what ran.
#
#   bench/merged_session.sh OUTDIR SOLDER_BINARY [PYTHON_EXTENSION]
#
# Needs: the CuTe headers (SOLDER_CUTLASS_INCLUDE), torch. PYTHON_EXTENSION is a built
# solder/_solder*.so for the device's Python (copied into python/solder/; torch.sh is skipped without it).
# Env: CASES, VERIFY, NO_SKELETON, PEERS_LIMIT (bench/whole_session.sh); RUN_LIMIT and TORCH_LIMIT
# (seconds for run.sh and torch.sh; defaults 220 and 170).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/merged_session.sh OUTDIR SOLDER_BINARY [PYTHON_EXTENSION]}
bin=${2:?usage: bench/merged_session.sh OUTDIR SOLDER_BINARY [PYTHON_EXTENSION]}
ext=${3:-}
mkdir -p "$out" build
cp "$bin" build/solder
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

echo "== 1. tests/gpu/run.sh"
SOLDER_REBUILD=0 timeout "${RUN_LIMIT:-220}" bash tests/gpu/run.sh "$out/e2e" > "$out/e2e.log" 2>&1
echo "rc=$? after $(elapsed) s"
tail -n 12 "$out/e2e.log"

echo "== 2. timing (bench/whole_session.sh)"
bash bench/whole_session.sh "$out/timing" build/solder 2>&1 | tail -n 40
echo "after $(elapsed) s"

if [ -n "$ext" ]; then
  echo "== 3. tests/gpu/torch.sh"
  cp "$ext" python/solder/
  PYTHONPATH=$PWD/python PYTHON=python3 timeout "${TORCH_LIMIT:-170}" bash tests/gpu/torch.sh > "$out/torch.log" 2>&1
  echo "rc=$? after $(elapsed) s"
  grep -E "passed|failed|FAIL|Error|ok " "$out/torch.log" | tail -n 30
fi
echo "== done after $(elapsed) s"
