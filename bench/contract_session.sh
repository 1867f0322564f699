#!/usr/bin/env bash
# The device call of the contractions work (one call on an H100): end-to-end verification of every
# example through the CUDA backend (tests/gpu/run.sh), the GEMM-skeleton path (`--no-fuse` on the GPU
# runs whole contractions on device/solder/gemm) verified and timed against the fused path and the
# peers (cuBLAS through torch eager, torch.compile), all in the same call.
#
#   bench/contract_session.sh OUTDIR [SOLDER_BINARY]
#
# Needs: a solder binary (default build/solder), the CuTe headers (SOLDER_CUTLASS_INCLUDE), torch.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/contract_session.sh OUTDIR [SOLDER_BINARY]}
bin=${2:-build/solder}
mkdir -p "$out" build
[ "$bin" != build/solder ] && cp "$bin" build/solder
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

echo "== 1. every example through the CUDA backend (small and paper sizes)"
SOLDER_REBUILD=0 timeout 420 tests/gpu/run.sh "$out/e2e" > "$out/e2e.txt" 2>&1
tail -n 3 "$out/e2e.txt"

echo "== 2. the GEMM skeleton: whole contractions (--no-fuse), verified"
: > "$out/skeleton-verify.tsv"
for args in "examples/ffn.sol --small" "examples/ffn.sol" "examples/gated_ffn.sol" "examples/nerf_mlp.sol" \
            "examples/linear_relu_backward.sol" "examples/moe_routing.sol" "examples/ffn.sol --dim M=512"; do
  start=$(date +%s%N)
  timeout 300 build/solder run --backend cuda --no-fuse $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - start) / 1000000 )) "$(tail -n 1 "$out/verify.log")" | tee -a "$out/skeleton-verify.tsv"
done

echo "== 3. timing: fused vs --no-fuse (skeleton), and the peers"
cases=(S1 S3 S8 G5)
: > "$out/solder-gemm.jsonl"
for tag in "${cases[@]}"; do
  dims=$(python3 - "$tag" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
c = [c for c in suites._gemm_cases() if c.id == "ffn-" + sys.argv[1]][0]
print(" ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
)
  for mode in fused unfused; do
    flag=""; [ $mode = unfused ] && flag="--no-fuse"
    line=$(timeout 240 build/solder bench examples/ffn.sol $dims $flag --json 2>>"$out/bench.err" | tail -n 1)
    echo "{\"case\": \"ffn-$tag\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder-gemm.jsonl"
    echo "ffn-$tag $mode: $(echo "$line" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us (floor %.1f us)" % (r["median_us"], r["floor_us"]))
except Exception as e: print("failed", e)')"
  done
done
timeout 240 python3 bench/peers.py --suite gemm_chains --cases "^ffn-(S1|S3|S8|G5)$" --out "$out/peers-gemm.jsonl" \
  --time-limit 150 2>&1 | tail -n 20
echo "== done"
