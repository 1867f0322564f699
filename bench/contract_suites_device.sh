#!/usr/bin/env bash
# One device call for the contractions suite (issue 15: linear_relu_backward, nerf_mlp, conv_chain), run
# from a copy of the tree that holds a built solder binary in build/:
#
#   bench/contract_suites_device.sh OUTDIR [DEADLINE_S]
#
# (1) every kernel the call needs is compiled in parallel into the NVRTC cache; (2) the three examples
# run through the CUDA backend at their small and default sizes, each verified against the float64
# reference (what tests/gpu/run.sh does per example); (3) Solder's bench cases of the suite, one at a
# time (`solder bench --json`), Solder first; (4) the peers of bench/peers.py in the same call, torch
# eager for every case, then torch.compile (max-autotune-no-cudagraphs) until the deadline; (5) ncu's
# duration of each kernel of nerf_mlp at the default sizes. Everything goes to OUTDIR as it runs.
# Env: SOLDER_COMMIT (stamped in the records), SOLDER_CUTLASS_INCLUDE (CuTe headers).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/contract_suites_device.sh OUTDIR [DEADLINE_S]}
deadline=${2:-400}
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/inductor}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
examples="linear_relu_backward nerf_mlp conv_chain"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"

echo "== 1. compile cache ($(nproc) in parallel)"
{
  for e in $examples; do
    echo "timeout 200 build/solder bench examples/$e.sol --small --compile-only"
    echo "timeout 200 build/solder bench examples/$e.sol --compile-only"
  done
  python3 bench/suites.py --suite contractions --solder-commands --compile-only --timeout 200
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   after $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 2. verification through the CUDA backend"
for e in $examples; do
  for sizes in small default; do
    flag=""; [ "$sizes" = small ] && flag="--small"
    t0=$(date +%s%N)
    timeout 120 build/solder run --backend cuda $flag --json "examples/$e.sol" > "$out/run-$e-$sizes.json" 2> "$out/run-$e-$sizes.err"
    rc=$?
    printf '   %-22s %-8s rc=%s %6d ms\n' "$e" "$sizes" "$rc" $(( ($(date +%s%N) - t0) / 1000000 ))
    grep -o '"rel_error":[^,]*' "$out/run-$e-$sizes.json" 2>/dev/null | head -3 | sed 's/^/      /'
    [ "$rc" = 0 ] || tail -n 3 "$out/run-$e-$sizes.err"
  done
done

echo "== 3. solder bench, $(left) s left"
python3 bench/suites.py --suite contractions --solder-commands --timeout 90 --out "$out/solder-contractions.jsonl" |
  while IFS= read -r line; do
    [ "$(left)" -lt 60 ] && { echo "   deadline: skipped $line"; continue; }
    sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
  done
python3 - "$out/solder-contractions.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except Exception: continue
    r = r.get("result", r)
    print(f"   solder {r.get('program')!s:22} {json.dumps(r.get('dims'))[:70]:72} {r.get('kernels')} kernels "
          f"{r.get('median_us')} us (floor {r.get('floor_us')})")
PY

echo "== 4. peers, $(left) s left"
timeout $(( $(left) > 40 ? $(left) - 30 : 10 )) python3 bench/peers.py --suite contractions --peers eager --no-ceilings \
  --out "$out/peers-contractions.jsonl" --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | tail -n 12
timeout $(( $(left) > 50 ? $(left) - 40 : 10 )) python3 bench/peers.py --suite contractions --peers compile --no-ceilings \
  --cases 'linear_relu_backward-nerf|nerf_mlp|conv_chain-C5|conv_chain-C1' --time-limit $(( $(left) > 120 ? $(left) - 110 : 10 )) \
  --out "$out/peers-contractions.jsonl" --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | tail -n 12

echo "== 5. ncu: nerf_mlp's kernels, $(left) s left"
if [ "$(left)" -gt 40 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) - 10 )) ncu --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    --launch-count 14 build/solder run --backend cuda examples/nerf_mlp.sol > "$out/ncu-nerf.txt" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|gpu__time_duration|sm__throughput|dram__throughput" "$out/ncu-nerf.txt" | head -60
fi
echo "== done after $(( $(date +%s) - start )) s"
