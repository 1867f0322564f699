#!/usr/bin/env bash
# Times attention examples at the paper shape (B=4, S=4096, H=16) for several GPU tile sizes
# (`solder bench --tile-rows R --tile-cols C`), to choose gpu_fusion_params. Needs a GPU.
# Usage: bench/sweep_tiles.sh [EXAMPLE...]    (default: vanilla causal softcap sliding_window)
set -u
cd "$(dirname "$0")/.."
if [ ! -x build/solder ] || [ "${SOLDER_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > /tmp/sweep-cmake.log 2>&1 &&
    cmake --build build -j "$(nproc)" --target solder > /tmp/sweep-build.log 2>&1 || { tail -30 /tmp/sweep-build.log; exit 1; }
fi
examples=${*:-vanilla causal softcap sliding_window}
for ex in $examples; do
  for d in 64 128; do
    for t in "128 64" "128 128" "64 64" "64 128"; do
      set -- $t
      line=$(build/solder bench "examples/$ex.sol" --dim B=4 --dim S=4096 --dim D=$d --dim H=16 --tile-rows "$1" --tile-cols "$2" --json 2>&1 |
        python3 -c "import json,sys
t=sys.stdin.read()
try: d=json.loads(t.strip().splitlines()[-1]); print('%9.1f us %6.1f TFLOP/s kernels=%d' % (d['median_us'], d['tflops'], d['kernels']))
except Exception: print('error: ' + t.strip()[-200:])")
      printf '%-16s D=%-4s rows=%-4s cols=%-4s %s\n' "$ex" "$d" "$1" "$2" "$line"
    done
  done
done
