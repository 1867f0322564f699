#!/usr/bin/env bash
# tf32's device calls (issue 15, twentieth session; bench/NOTES.md "tf32"), from the mini root that
# bench/tf32/stage.sh stages, CuTe headers in ../cutlass:
#   cd .devcarry/tf32 && DEADLINE=120 bash bench/tf32/call.sh        (DRY_RUN=1: the commands only)
#   1. the GEMM skeleton's device test, tf32 cases only (GEMM_TEST_FILTER=tf32: both consumer counts, ragged
#      shapes, split-K, a cluster, the tail split, ping-pong, row stores, 3xTF32 of split operands against
#      float64, and which rounding wgmma applies to unrounded f32 bits);
#   2. bin/bench_gemm tf32 (3xTF32 end to end at 4096³ and 8192³ with its split, and the tf32 GEMM alone at
#      K = N and 3N), then bench/gemm/peer.py f32 (cuBLAS SGEMM and 1xTF32 at the same sizes, with the same
#      sampled accuracy check), then bench_gemm tf32 once more if time is left (A B A);
#   3. `solder bench` of bench/tf32/f32mm.sol at 4096³ (its plan of the day: SCALAR on main) under a timeout,
#      and `solder run --backend cuda` of it at its small size against the float64 reference.
# Everything goes under $OUT/r, packed into $OUT/r.tgz after every step.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
DRY=${DRY_RUN:-0}
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s); DEADLINE=${DEADLINE:-120}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { [ "$DRY" = 1 ] || tar czf $O/r.tgz -C $O r 2>/dev/null; }
# step NAME SECONDS CMD...: CMD under a timeout into r/NAME.txt (DRY_RUN=1: printed), its exit status after
step() {
  local name=$1 limit=$2; shift 2
  if [ "$DRY" = 1 ]; then echo "timeout $limit $* > r/$name.txt"; return; fi
  [ "$(left)" -gt 10 ] || { echo "   skipped $name: $(left) s left"; return; }
  [ "$limit" -lt "$(left)" ] || limit=$(( $(left) - 3 ))
  local t0=$(date +%s.%N)
  timeout $limit "$@" > $O/r/$name.txt 2>&1
  local rc=$?
  echo "$name rc $rc span $t0 $(date +%s.%N)" >> $O/r/steps.txt
  echo "   $name rc $rc ($(left) s left): $(tail -n1 $O/r/$name.txt)"
  pack
}
if [ "$DRY" != 1 ]; then
  echo "commit $SOLDER_COMMIT; start $(date -u +%FT%TZ)" | tee $O/r/call.txt
  bash bench/unpack_staged.sh
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/r/device.txt 2>&1
fi
echo "== 1. device test, tf32 cases"
GEMM_TEST_FILTER=tf32 step dt-gemm-tf32 45 bin/test_sm90_gemm 2026
[ "$DRY" = 1 ] || grep "^FAIL\|matches\|1xTF32" $O/r/dt-gemm-tf32.txt | head -8
echo "== 2. 3xTF32 and the tf32 GEMM, then the peers (cuBLAS SGEMM, 1xTF32)"
step bench-tf32-a 40 bin/bench_gemm tf32 $O/r/bench-tf32-a.json
step peer-f32 30 python3 bench/gemm/peer.py $O/r/peer-f32.json f32
step bench-tf32-b 40 bin/bench_gemm tf32 $O/r/bench-tf32-b.json
echo "== 3. f32mm through solder (main's plan)"
step f32mm-small 20 build/solder run bench/tf32/f32mm.sol --backend cuda --small
step f32mm-bench 25 build/solder bench bench/tf32/f32mm.sol --json
echo "== done ($(left) s left)"
pack
