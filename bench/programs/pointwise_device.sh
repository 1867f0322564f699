#!/usr/bin/env bash
# Pointwise speed (issues 18/15, branch pointwise-speed; bench/NOTES.md "Pointwise speed"): on an H100,
# verify the register pass of the generic writer through `solder run --backend cuda`, then time
# bench/programs/silu_mul.sol and rmsnorm.sol at the run-8 shapes (Llama MLP, 512 tokens), Solder first,
# then torch.compile / eager when torch is importable. Prints one line per check and per timing.
# Usage (repo root): bench/programs/pointwise_device.sh [SOLDER] [PROGRAM_DIR] [OUT_DIR]
#   SOLDER       the solder binary (default build/solder)
#   PROGRAM_DIR  where silu_mul.sol, rmsnorm.sol, pointwise_peers.py are (default bench/programs)
#   OUT_DIR      logs and JSON (default build-dev/pointwise)
# BASELINE_SOLDER=path times an older solder binary on the same programs after this one.
# Exit status 1 when a verification fails.
set -uo pipefail
solder=${1:-build/solder}
dir=${2:-bench/programs}
out=${3:-build-dev/pointwise}
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-/tmp/solder-pointwise-cache}
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
verify() {  # label file [--small | --dim NAME=VALUE ...]
  local label=$1 file=$2; shift 2
  timeout 60 "$solder" run --backend cuda "$file" "$@" > "$out/run.$label.txt" 2>&1
  local rc=$?
  if [ $rc = 0 ]; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$rc: $(tail -c 300 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
# The register pass: SiLU·up and RMSNorm at small, ragged and default sizes; the examples it can take
# at other sizes (softmax with the row whole, 1024 long), and the memory-bound examples it must leave
# alone (stream loops), at small and default sizes.
{
  verify silu_mul.small "$dir/silu_mul.sol" --small &
  verify silu_mul.ragged "$dir/silu_mul.sol" --dim T=64 --dim F=5000 &
  verify rmsnorm.small "$dir/rmsnorm.sol" --small &
  verify rmsnorm.H1024 "$dir/rmsnorm.sol" --dim T=7 --dim H=1024 &
  verify softmax.N1024 examples/softmax.sol --dim T=64 --dim N=1024 &
  verify rmsnorm.H8192 "$dir/rmsnorm.sol" --dim T=3 --dim H=8192 &
  wait
  verify silu_mul.default "$dir/silu_mul.sol" &
  verify rmsnorm.default "$dir/rmsnorm.sol" &
  verify softmax.small examples/softmax.sol --small &
  verify variance.small examples/variance.sol --small &
  verify linear_relu_backward.small examples/linear_relu_backward.sol --small &
  wait
} > "$out/verify.txt"
cat "$out/verify.txt"
status=0
grep -q FAILED "$out/verify.txt" && status=1
echo "verify: $(grep -c verified "$out/verify.txt") of $(wc -l < "$out/verify.txt") verified"
bench() {  # binary label file
  local bin=$1 label=$2 file=$3
  timeout 40 "$bin" bench "$file" --replays 50 --json > "$out/bench.$label.json" 2> "$out/bench.$label.err"
  python3 - "$label" "$out/bench.$label.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
    print(f"bench {label:22} {r['median_us']:8.2f} us  floor {r['floor_us']:6.2f} us  x{r['median_us'] / r['floor_us']:5.2f}  {r['gbs']:6.0f} GB/s  kernels {r['kernels']}")
except Exception as e:
    print(f"bench {label:22} ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
}
bench "$solder" solder.silu_mul "$dir/silu_mul.sol"
bench "$solder" solder.rmsnorm "$dir/rmsnorm.sol"
if [ -n "${BASELINE_SOLDER:-}" ] && [ -x "$BASELINE_SOLDER" ]; then
  bench "$BASELINE_SOLDER" baseline.silu_mul "$dir/silu_mul.sol"
  bench "$BASELINE_SOLDER" baseline.rmsnorm "$dir/rmsnorm.sol"
fi
echo "solder bench done ($(( $(date +%s) - start )) s)"
python=${PYTHON:-python3}
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  timeout 45 "$python" "$dir/pointwise_peers.py" 2>&1 | tee "$out/peers.txt" | grep -E "^peer|Error|error" | head -20
else
  echo "peer: torch with CUDA not importable by $python: no peer timings"
fi
echo "pointwise_device.sh done in $(( $(date +%s) - start )) s, status $status"
exit $status
