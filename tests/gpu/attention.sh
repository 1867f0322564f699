#!/usr/bin/env bash
# GPU check of the tensor-core emitter (src/backend/cuda/mma_stream_codegen.cpp), for a machine with
# an H100: builds Solder, runs every attention example through the CUDA backend at sizes that make
# the emitter stream several tiles (multi-tile, ragged, paper, head dim 128), each verified against
# the float64 reference, then times the quick attention suite with `solder bench`. Every check and the
# bench run once per tensor-core path of SOLDER_MMA_PATHS (default "wgmma wgmma-overlap sync"):
# SOLDER_MMA_PATH=wgmma (the default: wgmma where the shape allows it), =wgmma-overlap (the next tile's
# row statements overlapping P·V), =sync (mma.sync everywhere); the
# `path` column says which path each kernel took.
# Usage: [SOLDER_MMA_PATHS="wgmma sync"] tests/gpu/attention.sh [OUT_DIR] [--no-bench]
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
check() {  # name label args...   (SOLDER_MMA_PATH from the caller)
  local name=$1 label=$2.$SOLDER_MMA_PATH; shift 2
  timeout 300 build/solder run --backend cuda "examples/$name.sol" "$@" > "$out/$name.$label.txt" 2>&1
  local rc=$?
  local emitted=$(build/solder emit --cuda "examples/$name.sol" "$@" 2>/dev/null)
  local kind=$(grep -c '^// tensor-core emitter:' <<< "$emitted")
  local path=sync
  grep -q '^// tensor-core emitter:.*wgmma m64' <<< "$emitted" && path=wgmma-serial
  grep -q '^// tensor-core emitter:.*overlap P · V' <<< "$emitted" && path=wgmma
  printf '%-16s %-16s rc=%s mma-kernels=%s path=%-12s %s\n' "$name" "$label" "$rc" "$kind" "$path" "$(grep -Eo 'verified|MISMATCH[^|]*' "$out/$name.$label.txt" | head -1)" | tee -a "$out/status.tsv"
}
paths=${SOLDER_MMA_PATHS:-wgmma wgmma-overlap sync}
for SOLDER_MMA_PATH in $paths; do
  export SOLDER_MMA_PATH
  for n in $attention; do
    if [ $SOLDER_MMA_PATH = wgmma ]; then  # small tiles: mma.sync on either setting
      check $n tiles --small --dim S=256 --dim D=64
      check $n ragged --small --dim S=200 --dim D=32
    fi
    check $n paper
    check $n paper-ragged --dim S=4000                       # 128-row blocks (2 warpgroups), last key tile ragged
    check $n rows64-ragged --dim S=1000 --dim B=2 --dim H=16  # 64-row blocks (1 warpgroup), ragged rows and keys
  done
  check vanilla d128 --dim D=128 --dim S=2048 --dim B=2
  check causal d128 --dim D=128 --dim S=2048 --dim B=2
done
unset SOLDER_MMA_PATH
echo "failures: $(grep -vc 'rc=0' "$out/status.tsv")"
[ "${2:-}" = --no-bench ] && exit 0
python3 bench/suites.py --solder-commands --suite attention --quick --solder build/solder > "$out/bench-commands.sh"
sed -i "s#>> bench/results/solder.jsonl#>> $out/solder-bench.jsonl#" "$out/bench-commands.sh"
for path in $paths; do
  sed "s#$out/solder-bench.jsonl#$out/solder-bench.$path.jsonl#" "$out/bench-commands.sh" > "$out/bench-commands.$path.sh"
  echo "== SOLDER_MMA_PATH=$path"
  SOLDER_MMA_PATH=$path bash "$out/bench-commands.$path.sh" 2> "$out/bench.$path.err"
  python3 - "$out/solder-bench.$path.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    dims = ' '.join(f'{k}={v}' for k, v in r['dims'].items())
    print(f"{r['program']:16} {dims:44.44} {r['median_us']:10.1f} us {r['tflops']:7.1f} TFLOP/s {r['median_us'] / r['floor_us']:7.2f} x floor")
PY
done
