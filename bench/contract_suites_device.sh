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
# duration of each kernel of conv_chain at its slowest cell (against the floor; the full set) and of nerf_mlp at the
# default sizes. conv_chain is also verified at the suite's cells C1, C6 and C7. Everything goes to OUTDIR as it runs.
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

# conv_chain at the suite's other cells (C1: 1x1 then 1x1; C6, C7: deeper ResNet stages), default sizes.
for cell in "C1 --dim KS=1 --dim OC1=256 --dim OC2=64" "C6 --dim IC=128 --dim HH=28 --dim WW=28 --dim OC1=128 --dim OC2=512" \
            "C7 --dim IC=256 --dim HH=14 --dim WW=14 --dim OC1=256 --dim OC2=1024"; do
  set -- $cell; tag=$1; shift
  timeout 120 build/solder run --backend cuda --json "$@" examples/conv_chain.sol > "$out/run-conv_chain-$tag.json" 2> "$out/run-conv_chain-$tag.err"
  rc=$?
  printf '   %-22s %-8s rc=%s\n' conv_chain "$tag" "$rc"
  grep -o '"rel_error":[^,]*' "$out/run-conv_chain-$tag.json" 2>/dev/null | head -3 | sed 's/^/      /'
  [ "$rc" = 0 ] || tail -n 3 "$out/run-conv_chain-$tag.err"
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

echo "== 3b. gathered-GEMM tile variants (SOLDER_GATHERED_TILE=BM,BN,BK,THREADS), $(left) s left"
for v in "C5:: 64,32,64,128 32,32,32,128 32,32,64,256 64,64,64,128" \
         "C7:--dim IC=256 --dim HH=14 --dim WW=14 --dim OC1=256 --dim OC2=1024: 32,32,64,128 32,32,32,256 64,32,64,256"; do
  tag=${v%%:*}; rest=${v#*:}; dims=${rest%%:*}; tiles=${rest#*:}
  for t in $tiles; do
    [ "$(left)" -lt 150 ] && { echo "   deadline: skipped $tag $t"; continue; }
    r=$(SOLDER_GATHERED_TILE=$t timeout 60 build/solder bench --json $dims examples/conv_chain.sol 2>> "$out/variants.err")
    echo "{\"cell\": \"$tag\", \"tile\": \"$t\", \"result\": $r}" >> "$out/variants.jsonl"
    printf '   %-4s %-14s %s us\n' "$tag" "$t" "$(echo "$r" | grep -o '"median_us":[^,]*' | head -1)"
  done
done

echo "== 4. peers, $(left) s left"
timeout $(( $(left) > 40 ? $(left) - 30 : 10 )) python3 bench/peers.py --suite contractions --peers eager --no-ceilings \
  --out "$out/peers-contractions.jsonl" --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | tail -n 12
timeout $(( $(left) > 50 ? $(left) - 40 : 10 )) python3 bench/peers.py --suite contractions --peers compile --no-ceilings \
  --cases 'linear_relu_backward-nerf|nerf_mlp|conv_chain-C5|conv_chain-C1' --time-limit $(( $(left) > 120 ? $(left) - 110 : 10 )) \
  --out "$out/peers-contractions.jsonl" --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | tail -n 12

echo "== 5a. ncu: conv_chain's kernels at its slowest cell against its floor, $(left) s left"
worst=$(python3 - "$out/solder-contractions.jsonl" <<'PY'
import json, sys
best = None
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except Exception: continue
    r = r.get("result", r)
    if r.get("program") != "conv_chain" or not r.get("median_us"): continue
    ratio = r["median_us"] / max(r.get("floor_us") or 1e-9, 1e-9)
    if best is None or ratio > best[0]: best = (ratio, " ".join(f"--dim {k}={v}" for k, v in r["dims"].items()))
print(best[1] if best else "")
PY
)
echo "   worst conv cell: $worst"
if [ "$(left)" -gt 40 ] && command -v ncu > /dev/null; then
  timeout 60 ncu --set full --launch-count 2 build/solder run --backend cuda $worst examples/conv_chain.sol > "$out/ncu-conv.txt" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|L1/TEX Hit|L2 Hit|Theoretical Occupancy|Block Limit" "$out/ncu-conv.txt" | head -40
fi

echo "== 5. ncu: nerf_mlp's kernels, $(left) s left"
if [ "$(left)" -gt 40 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) - 10 )) ncu --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    --launch-count 16 build/solder run --backend cuda examples/nerf_mlp.sol > "$out/ncu-nerf.txt" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|gpu__time_duration|sm__throughput|dram__throughput" "$out/ncu-nerf.txt" | head -60
fi
echo "== done after $(( $(date +%s) - start )) s"
