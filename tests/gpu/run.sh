#!/usr/bin/env bash
# GPU end-to-end check, for a machine with an H100 (sm_90) and the CUDA toolkit:
#   builds Solder, then runs every example through the CUDA backend at its small sizes and at its
#   default (paper) sizes, each verified against the float64 reference (sampled when large).
# Usage: tests/gpu/run.sh [OUT_DIR]       (logs and a summary table go to OUT_DIR, default build/gpu-results)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-results}
mkdir -p "$out"
jobs=$(nproc 2>/dev/null || echo 4)
if [ ! -x build/solder ] || [ "${SOLDER_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
  cmake --build build -j "$jobs" > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}

run_one() {  # example sizes
  local file=$1 sizes=$2 name
  name=$(basename "$file" .sol)
  local flag=""
  [ "$sizes" = small ] && flag="--small"
  local start=$(date +%s%N)
  timeout 600 build/solder run --backend cuda $flag --json "$file" > "$out/$name.$sizes.json" 2> "$out/$name.$sizes.err"
  local rc=$?
  local millis=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s\t%s\t%s\t%d.%03d\n' "$name" "$sizes" "$rc" $((millis / 1000)) $((millis % 1000)) >> "$out/status.tsv"
}
export -f run_one
export out
: > "$out/status.tsv"
parallel=${SOLDER_GPU_PARALLEL:-6}
for sizes in small default; do
  ls examples/*.sol | xargs -P "$parallel" -I{} bash -c "run_one {} $sizes"
done

python3 - "$out" <<'PY'
import json, sys, os, glob
out = sys.argv[1]
rows = [l.split('\t') for l in open(os.path.join(out, 'status.tsv')).read().split('\n') if l]
rows.sort()
failures = 0
print(f"{'example':22} {'sizes':8} {'status':9} {'worst error':>12} {'tolerance':>9} {'seconds':>7}")
for name, sizes, rc, secs in rows:
    path = os.path.join(out, f"{name}.{sizes}.json")
    status, worst, tol = ('verified' if rc == '0' else 'MISMATCH' if rc == '1' else 'ERROR'), '', ''
    try:
        r = json.load(open(path))
        errs = [o.get('rel_error', 0) for o in r['outputs']]
        worst = '%.2e' % max(float(e) if e not in ('nan', 'inf') else float('inf') for e in errs)
        tol = '%.0e' % r['outputs'][0].get('tolerance', 0)
    except Exception:
        err = open(os.path.join(out, f"{name}.{sizes}.err")).read().strip().splitlines()
        worst = (err[-1] if err else '')[:60]
    if rc != '0':
        failures += 1
    print(f"{name:22} {sizes:8} {status:9} {worst:>12} {tol:>9} {float(secs):7.1f}")
print(f"\n{len(rows) - failures} of {len(rows)} runs verified")
sys.exit(1 if failures else 0)
PY
