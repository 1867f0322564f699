#!/usr/bin/env bash
# GPU check of the tensor-core emitter (src/backend/cuda/mma_stream_codegen.cpp), for a machine with
# an H100: builds Solder, runs every attention example through the CUDA backend at sizes that make
# the emitter stream several tiles (multi-tile, ragged, paper, head dim 128), each verified against
# the float64 reference, then times the quick attention suite with `solder bench`.
# Usage: tests/gpu/attention.sh [OUT_DIR] [--no-bench]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-attention}
mkdir -p "$out"
if [ ! -x build/solder ] || [ "${SOLDER_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
  cmake --build build -j "$(nproc)" --target solder > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
fi
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
attention="vanilla causal alibi softcap sliding_window prefix_lm document_mask gqa diff_attn"
: > "$out/status.tsv"
check() {  # name label args...
  local name=$1 label=$2; shift 2
  timeout 300 build/solder run --backend cuda "examples/$name.sol" "$@" > "$out/$name.$label.txt" 2>&1
  local rc=$?
  local kind=$(build/solder emit --cuda "examples/$name.sol" "$@" 2>/dev/null | grep -c '^// tensor-core emitter:')
  printf '%-16s %-10s rc=%s mma-kernels=%s %s\n' "$name" "$label" "$rc" "$kind" "$(grep -Eo 'verified|MISMATCH[^|]*' "$out/$name.$label.txt" | head -1)" | tee -a "$out/status.tsv"
}
for n in $attention; do
  check $n tiles --small --dim S=256 --dim D=64
  check $n ragged --small --dim S=200 --dim D=32
  check $n paper
done
check vanilla d128 --dim D=128 --dim S=2048 --dim B=2
check causal d128 --dim D=128 --dim S=2048 --dim B=2
echo "failures: $(grep -vc 'rc=0' "$out/status.tsv")"
[ "${2:-}" = --no-bench ] && exit 0
python3 bench/suites.py --solder-commands --suite attention --quick --solder build/solder > "$out/bench-commands.sh"
sed -i "s#>> bench/results/solder.jsonl#>> $out/solder-bench.jsonl#" "$out/bench-commands.sh"
bash "$out/bench-commands.sh" 2> "$out/bench.err"
python3 - "$out/solder-bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    dims = ' '.join(f'{k}={v}' for k, v in r['dims'].items())
    print(f"{r['program']:16} {dims:44.44} {r['median_us']:10.1f} us {r['tflops']:7.1f} TFLOP/s {r['median_us'] / r['floor_us']:7.2f} x floor")
PY
