#!/usr/bin/env bash
# One device call: the GEMM skeleton's device test, SASS facts, cold NVRTC compile times, the headline
# benchmark with its peers, and the sweep. Runs from a folder holding bin/{test_sm90_gemm,bench_gemm,
# nvrtc_time}, device/, cutlass/ (the CuTe include tree) and bench/gemm/peer.py, built on the build
# machine by bench/gemm/stage.sh. Logs and JSON go to $OUT (default ./out).
# Usage: device_run.sh [test] [sass] [nvrtc] [headline] [sweep]   (default: all of them)
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
steps=${*:-test sass nvrtc headline sweep}
CUDA=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$PWD/bin:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for step in $steps; do
  start=$(date +%s)
  case $step in
    test) timeout 240 ./bin/test_sm90_gemm 2026 > "$OUT/test.log" 2>&1; echo "test rc=$?"; grep -c ^PASS "$OUT/test.log"; grep -E "^FAIL|^OK|^FAILED" "$OUT/test.log" | head -20 ;;
    sass) for b in test_sm90_gemm bench_gemm; do
            "$CUDA/bin/cuobjdump" -sass "bin/$b" > "$OUT/$b.sass" 2>&1
            echo "$b: $(grep -c HGMMA "$OUT/$b.sass") HGMMA, $(grep -c QGMMA "$OUT/$b.sass") QGMMA, $(grep -c UTMALDG "$OUT/$b.sass") UTMALDG, $(grep -c USETMAXREG "$OUT/$b.sass") USETMAXREG, $(grep -cE 'LDL|STL' "$OUT/$b.sass") LDL/STL"
            gzip -f "$OUT/$b.sass"
          done ;;
    nvrtc) ./bin/nvrtc_time "$CUDA" "$PWD/cutlass" "$PWD/device" 2>&1 | tee "$OUT/nvrtc.log" ;;
    headline) timeout 120 ./bin/bench_gemm headline "$OUT/headline.json" 2>&1 | tee "$OUT/headline.log"
              python3 bench/gemm/peer.py "$OUT/peer.json" 2>&1 | tee "$OUT/peer.log"
              timeout 120 ./bin/bench_gemm headline "$OUT/headline2.json" 2>&1 | tee "$OUT/headline2.log" ;;
    sweep) timeout 200 ./bin/bench_gemm sweep "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1; echo "sweep rc=$? $(grep -c ^solder "$OUT/sweep.log") pairs"; tail -3 "$OUT/sweep.log" ;;
  esac
  echo "step $step: $(( $(date +%s) - start )) s"
done
