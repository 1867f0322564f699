#!/usr/bin/env bash
# One device call for split-K (bench/gemm/stage_splitk.sh stages what it needs): the skeleton's device
# test (every case, split-K included), bench_gemm splitk with cuBLAS (peer.py splitk) timed in between
# two runs of ours, and Solder end to end on the GPU (--no-fuse: the skeleton path) for examples/ffn.sol
# and three single M = 128 products, verified against the float64 reference, then timed.
# Usage (from the staged folder): bash bench/gemm/device_splitk.sh; logs under $OUT (default ./out).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
CUDA=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$PWD/bin:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-}"
export SOLDER_CUTLASS_INCLUDE="$PWD/cutlass" SOLDER_CACHE_DIR="$PWD/kernel-cache"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
step() { echo "== $1 ($(date +%s))"; }
step test
timeout 150 ./bin/test_sm90_gemm 2026 > "$OUT/test.log" 2>&1
echo "test rc=$?"; grep -E "^FAIL" "$OUT/test.log" | head -20; tail -1 "$OUT/test.log"
echo "split-K cases: $(grep -cE '^PASS .* k[0-9]+ ' "$OUT/test.log") pass, $(grep -cE '^FAIL .* k[0-9]+ ' "$OUT/test.log") fail"
step bench1
timeout 60 ./bin/bench_gemm splitk "$OUT/splitk1.json" > "$OUT/splitk1.log" 2>&1; echo "bench rc=$?"
step peer
python3 bench/gemm/peer.py "$OUT/peer.json" splitk 2>&1 | tee "$OUT/peer.log" | grep peer
step bench2
timeout 60 ./bin/bench_gemm splitk "$OUT/splitk2.json" > "$OUT/splitk2.log" 2>&1; echo "bench rc=$?"
paste <(grep -E "^solder|check" "$OUT/splitk1.log") <(grep -E "^solder|check" "$OUT/splitk2.log" | awk '{print $(NF-3), $(NF-1)}')
step e2e
for f in examples/skinny_3072.sol examples/skinny_4096.sol examples/skinny_8192.sol examples/ffn.sol; do
  timeout 90 ./bin/solder run --backend cuda --no-fuse "$f" > "$OUT/$(basename $f).run.log" 2>&1; echo "run $f rc=$?"
  tail -6 "$OUT/$(basename $f).run.log"
  timeout 60 ./bin/solder bench --no-fuse "$f" > "$OUT/$(basename $f).bench.log" 2>&1; echo "bench $f rc=$?"
  tail -6 "$OUT/$(basename $f).bench.log"
done
step end
# The device tool returns at most 8 files: everything in one archive.
tar czf /tmp/splitk-results.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/splitk-results.tgz "$OUT/splitk-results.tgz"
