#!/usr/bin/env bash
# Reductions v2 on the GPU (bench/NOTES.md, "reductions v2"): build solder, verify examples through
# the CUDA backend (every example at its small sizes, the memory-bound ones at their default sizes
# too), then time the reduction workloads. Logs and JSON under OUT_DIR (default build-dev/reductions).
# Usage: bench/reductions_v2.sh [OUT_DIR] [verify|bench|all]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-dev/reductions}
what=${2:-all}
mkdir -p "$out"
start=$(date +%s)
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > "$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; exit 1; }
cmake --build build-dev -j16 --target solder > "$out/build.log" 2>&1 || { grep -B2 -A8 error "$out/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
export SOLDER_CACHE_DIR=$PWD/build-dev/kernel-cache
solder=build-dev/solder
memory_bound="variance variance_offset softmax inertia batch_reduction rmsnorm_gemm llama_decode mla_decode moe_routing"

verify_one() {  # example sizes
  local flag=""; [ "$2" = small ] && flag="--small"
  case "$2" in *=*) flag="--dim ${2//,/ --dim }";; esac  # NAME=VALUE[,NAME=VALUE]: dims
  timeout 100 build-dev/solder run --backend cuda $flag examples/$1.sol > "$out/run.$1.$2.txt" 2>&1
  local rc=$?
  printf '%-22s %-8s %s\n' "$1" "$2" "$([ $rc = 0 ] && echo verified || echo "FAILED rc=$rc: $(tail -c 300 "$out/run.$1.$2.txt" | tr '\n' ' ')")"
}
export -f verify_one
export out
if [ "$what" != bench ]; then
  { for f in examples/*.sol; do echo "$(basename "$f" .sol) small"; done
    for e in $memory_bound; do echo "$e default"; done
    echo "variance BS=128"; echo "inertia BS=64,N=8192"; echo "softmax T=64,N=5000"; echo "variance_offset BS=3,L=70001"; } |
    xargs -P 8 -L 1 bash -c 'verify_one "$0" "$1"' | sort > "$out/verify.txt"
  cat "$out/verify.txt"
  echo "verify: $(grep -c verified "$out/verify.txt") of $(wc -l < "$out/verify.txt") verified ($(( $(date +%s) - start )) s)"
fi
if [ "$what" != verify ]; then
  bench_one() {  # label example [dims...]
    local label=$1 example=$2; shift 2
    local dims=(); for d in "$@"; do dims+=(--dim "$d"); done
    timeout 60 $solder bench "examples/$example.sol" "${dims[@]}" --replays 30 --json > "$out/bench.$label.json" 2> "$out/bench.$label.err"
    python3 - "$label" "$out/bench.$label.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
    print(f"{label:24} {r['median_us']:10.2f} us  floor {r['floor_us']:8.2f} us  x{r['median_us'] / r['floor_us']:6.2f}  {r['gbs']:7.0f} GB/s  kernels {r['kernels']}")
except Exception as e:
    print(f"{label:24} ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
  }
  # rmsnorm_gemm's reduction part alone (its GEMM is a contraction, left to the tensor-core emitter)
  mkdir -p build-dev/programs
  printf 'program rms_part\ndim T = 2048, HID = 4096\nin x[T, HID] : bf16\nout ms[t] : f32 = sum(c) x[t, c] * x[t, c] / HID\n' > build-dev/programs/rms_part.sol
  cp build-dev/programs/rms_part.sol examples/.rms_part.sol 2>/dev/null
  for e in variance variance_offset softmax inertia batch_reduction rmsnorm_gemm .rms_part; do bench_one "$e" "$e"; done
  rm -f examples/.rms_part.sol
  for v in "1 8192" "128 32768" "512 8192" "1024 8192"; do set -- $v; bench_one "variance-$1x$2" variance "BS=$1" "L=$2"; done
  bench_one inertia-I4 inertia BS=128 N=32768
  echo "bench done ($(( $(date +%s) - start )) s)"
fi
