#!/usr/bin/env bash
# f32-policy's device calls (issue 15, twenty-first session; bench/NOTES.md "f32-policy"): the 3xTF32 compiler
# policy end to end, from the mini root that bench/merged_stage.sh stages (build/solder, examples/, bench/,
# tests/gpu/, COMMIT), CuTe headers in ../cutlass:
#   cd .devcarry/f32-policy && PHASE=1 LIMIT=120 bash bench/f32_policy/call.sh      (DRY_RUN=1: the commands only)
# PHASE 1 (verification): `solder run --backend cuda` of bench/tf32/f32mm.sol at --small (64³), a ragged
#   1000³ (K' = 3000), 4096³ and the examples in F32_EXAMPLES (their plans move to 3xTF32), against float64
#   (sampled where large); then a first time: `solder bench` of f32mm at 4096³ around bench/gemm/peer.py f32,
#   and the knob A/B at 1024³, as far as LIMIT allows.
# PHASE 2 (timing): f32mm verified again (the split now on tf32_split.cuh's tile; the GEMM device test's tf32
#   cases when bin/test_sm90_gemm is staged), then two interleaved rounds of `solder bench` of f32mm at 4096³
#   (the default, SOLDER_TF32_SPLIT=generic, SOLDER_GEMM_CLUSTER=2x1) and 8192³ around bench/gemm/peer.py f32
#   (cuBLAS SGEMM, allow_tf32=False, and 1xTF32, allow_tf32=True, both sizes, two rounds), the knob A/B at
#   1024³ (SOLDER_F32_CONTRACT=f32, main's scalar plan), and ncu's time of each kernel at 4096³ if time is left.
# Everything goes under $OUT/r, packed into $OUT/r.tgz after every step.
source bench/call_prologue.sh
mkdir -p $O/r
pack() { [ "$DRY" = 1 ] || tar czf $O/r.tgz -C $O r call.log 2>/dev/null; }
# step NAME SECONDS CMD...: CMD under a timeout into r/NAME.txt (DRY_RUN=1: printed), its exit status after
step() {
  local name=$1 limit=$2; shift 2
  if [ "$DRY" = 1 ]; then echo "timeout $limit $* > r/$name.txt"; return; fi
  [ "$(left)" -gt 8 ] || { stamp "   skipped $name: $(left) s left"; return; }
  [ "$limit" -lt "$(left)" ] || limit=$(( $(left) - 3 ))
  local t0=$(date +%s.%N)
  timeout $limit "$@" > $O/r/$name.txt 2>&1
  local rc=$?
  echo "$name rc $rc span $t0 $(date +%s.%N)" >> $O/r/steps.txt
  stamp "   $name rc $rc: $(grep -i 'verified\|FAIL\|error\|median' $O/r/$name.txt | tail -n2 | tr '\n' ' ')"
  pack
}
F=bench/tf32/f32mm.sol
[ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/r/device.txt 2>&1
if [ "${PHASE:-1}" = 1 ]; then
  stamp "== 1. verification against float64"
  step run-small 25 build/solder run $F --backend cuda --small
  step run-1000 30 build/solder run $F --backend cuda --dim M=1000 --dim N=1000 --dim K=1000
  step run-4096 40 build/solder run $F --backend cuda
  for e in ${F32_EXAMPLES:-}; do
    step run-$e-small 20 build/solder run examples/$e.sol --backend cuda --small
    step run-$e 30 build/solder run examples/$e.sol --backend cuda
  done
  stamp "== 2. a first time: f32mm 4096³ (A), the peers, f32mm (B), the knob at 1024³"
  step bench-4096-a 20 build/solder bench $F --json
  step peer-f32 40 python3 bench/gemm/peer.py $O/r/peer-f32.json f32
  step bench-4096-b 20 build/solder bench $F --json
  step knob-3x-1024 12 build/solder bench $F --json --dim M=1024 --dim N=1024 --dim K=1024
  step knob-f32-1024 15 env SOLDER_F32_CONTRACT=f32 build/solder bench $F --json --dim M=1024 --dim N=1024 --dim K=1024
else
  stamp "== 1. verification (the split on tf32_split.cuh's tile), the device test's tf32 cases if staged"
  step run-small 20 build/solder run $F --backend cuda --small
  step run-1000 20 build/solder run $F --backend cuda --dim M=1000 --dim N=1000 --dim K=1000
  step run-4096 25 build/solder run $F --backend cuda
  [ -x bin/test_sm90_gemm ] && GEMM_TEST_FILTER=tf32 step dt-gemm-tf32 40 bin/test_sm90_gemm 2026
  stamp "== 2. round 1: f32mm 4096³ (split on tf32_split.cuh / generic writer / 2x1 cluster), 8192³, the peers"
  G="SOLDER_TF32_SPLIT=generic"; C="SOLDER_GEMM_CLUSTER=2x1"
  step bench-4096-r1 15 build/solder bench $F --json
  step bench-4096-generic-r1 15 env $G build/solder bench $F --json
  step bench-4096-c2x1-r1 15 env $C build/solder bench $F --json
  step bench-8192-r1 20 build/solder bench $F --json --dim M=8192 --dim N=8192 --dim K=8192
  step peer-f32 40 python3 bench/gemm/peer.py $O/r/peer-f32.json f32
  stamp "== 3. round 2 (reversed), the knob at 1024³"
  step bench-8192-r2 20 build/solder bench $F --json --dim M=8192 --dim N=8192 --dim K=8192
  step bench-4096-c2x1-r2 15 env $C build/solder bench $F --json
  step bench-4096-generic-r2 15 env $G build/solder bench $F --json
  step bench-4096-r2 15 build/solder bench $F --json
  step knob-3x-1024 12 build/solder bench $F --json --dim M=1024 --dim N=1024 --dim K=1024
  step knob-f32-1024 15 env SOLDER_F32_CONTRACT=f32 build/solder bench $F --json --dim M=1024 --dim N=1024 --dim K=1024
  if command -v ncu >/dev/null && [ "$(left)" -gt 25 ]; then
    stamp "== 4. ncu: each kernel's time at 4096³ (one replay)"
    step ncu-4096 20 ncu --clock-control none --metrics gpu__time_duration.sum build/solder bench $F --replays 1 --calls-per-replay 1
  fi
fi
stamp "== done ($(left) s left)"
pack
