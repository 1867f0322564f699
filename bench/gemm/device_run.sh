#!/usr/bin/env bash
# One device call: the GEMM skeleton's device test, SASS facts, cold NVRTC compile times, the headline
# benchmark with its peers, and the sweep. Runs from a folder holding bin/{test_sm90_gemm,bench_gemm,
# nvrtc_time}, device/, cutlass/ (the CuTe include tree) and bench/gemm/peer.py, built on the build
# machine by bench/gemm/stage.sh. Logs and JSON go to $OUT (default ./out).
# Usage: device_run.sh [test] [sass] [nvrtc] [headline] [ncu] [sweep]   (default: all but ncu)
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
    test) timeout 240 ./bin/test_sm90_gemm 2026 > "$OUT/test.log" 2>&1; echo "test rc=$?" > "$OUT/test.summary"; grep -E "^FAIL|^OK|^FAILED" "$OUT/test.log" | head -20 >> "$OUT/test.summary"; cat "$OUT/test.summary" ;;
    diag) timeout 150 ./bin/bench_gemm diag "$OUT/diag.json" > "$OUT/diag.log" 2>&1; echo "diag rc=$?"; grep ^solder "$OUT/diag.log" ;;
    sass) for b in test_sm90_gemm bench_gemm; do
            "$CUDA/bin/cuobjdump" -sass "bin/$b" > "$OUT/$b.sass" 2>&1
            echo "$b: $(grep -c HGMMA "$OUT/$b.sass") HGMMA, $(grep -c QGMMA "$OUT/$b.sass") QGMMA, $(grep -c UTMALDG "$OUT/$b.sass") UTMALDG, $(grep -c USETMAXREG "$OUT/$b.sass") USETMAXREG, $(grep -cE 'LDL|STL' "$OUT/$b.sass") LDL/STL"
            gzip -f "$OUT/$b.sass"
          done ;;
    nvrtc) ./bin/nvrtc_time "$CUDA" "$PWD/cutlass" "$PWD/device" 2>&1 | tee "$OUT/nvrtc.log" ;;
    headline) timeout 120 ./bin/bench_gemm headline "$OUT/headline.json" 2>&1 | tee "$OUT/headline.log"
              python3 bench/gemm/peer.py "$OUT/peer.json" 2>&1 | tee "$OUT/peer.log"
              timeout 120 ./bin/bench_gemm headline "$OUT/headline2.json" 2>&1 | tee "$OUT/headline2.log" ;;
    ncu) NCU=$(command -v ncu || ls "$CUDA"/bin/ncu 2>/dev/null | head -1)
         if [ -n "$NCU" ]; then
           timeout 240 "$NCU" --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
             -k regex:gemm_kernel --launch-skip 1 --launch-count 1 ./bin/bench_gemm profile > "$OUT/ncu_bf16.txt" 2>&1
           timeout 240 "$NCU" --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
             -k regex:gemm_kernel --launch-skip 8 --launch-count 1 ./bin/bench_gemm profile > "$OUT/ncu_fp8.txt" 2>&1
           grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|SM Frequency|Stall|Issued Warp" "$OUT/ncu_fp8.txt" | head -30
         else echo "no ncu"; fi ;;
    sweep) timeout 200 ./bin/bench_gemm sweep "$OUT/sweep.json" > "$OUT/sweep.log" 2>&1; echo "sweep rc=$? $(grep -c ^solder "$OUT/sweep.log") pairs"; tail -3 "$OUT/sweep.log" ;;
  esac
  echo "step $step: $(( $(date +%s) - start )) s"
done
# The device tool returns only a few files: pack everything but the summary into one archive.
tar czf /tmp/gemm-results.tgz -C "$OUT" . && mv /tmp/gemm-results.tgz "$OUT/a-results.tgz" && find "$OUT" -type f ! -name a-results.tgz ! -name gpu.txt ! -name test.summary -delete
ls -la "$OUT"; cat "$OUT/test.summary" 2>/dev/null; true
