#!/usr/bin/env bash
# One short device call for conv_chain's implicit-GEMM kernels (the gathered writer, issue 15), run from
# the repository root of a tree whose solder binary is $SOLDER (default build/solder):
#
#   bench/conv_gather_device.sh OUTDIR [PROGRAMS_DIR] [DEADLINE_S]
#
# (1) every kernel compiled into the NVRTC cache in parallel; (2) verification through the CUDA backend
# against the float64 reference: conv_chain small, C1, C5 (default), C6, C7; C5 with the split-K cluster
# forced to 2 and 8 and with 256-thread tiles; nerf_mlp small (its default size, where z0, z5, zv are
# gathered, is in tests/gpu/run.sh); every program in PROGRAMS_DIR (tests/gpu/conv_gather: strides 1
# and 2, 1×1 to 5×5 kernels, ragged sizes), the first four also with the split forced to 4 (ranks with
# no K step);
# (3) `solder bench` of the suite's conv_chain cells, Solder first; (4) the peers of bench/peers.py in
# the same call: torch eager, then torch.compile in its default mode; (5) a short ncu of C5's 3×3
# kernel (h_kernel). Prints one line per check ("PASS"/"FAIL") and the timings; everything under OUTDIR.
#
# The gathered GEMM is planned only where the sm_90a skeletons are on, i.e. with the CuTe headers:
# SOLDER_CUTLASS_INCLUDE (default .devcarry/gemm/cutlass; carry it). Without them every contraction
# falls back to the fused kernels and this script stops after a FAIL line (the first call of branch
# conv-gather2 ran without them and measured the fallback: bench/NOTES.md).
set -uo pipefail
out=${1:?usage: bench/conv_gather_device.sh OUTDIR [PROGRAMS_DIR] [DEADLINE_S]}
programs=${2:-}
deadline=${3:-220}
SOLDER=${SOLDER:-build/solder}
mkdir -p "$out"
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/.devcarry/gemm/cutlass}
if [ ! -f "$SOLDER_CUTLASS_INCLUDE/cute/tensor.hpp" ]; then
  echo "   FAIL setup: no cute/tensor.hpp under SOLDER_CUTLASS_INCLUDE=$SOLDER_CUTLASS_INCLUDE (carry .devcarry/gemm/cutlass):"
  echo "        without it run and bench plan no gathered GEMM and this call would measure the fused fallback"
  exit 1
fi
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/inductor}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
C1="--dim KS=1 --dim OC1=256 --dim OC2=64"
C6="--dim IC=128 --dim HH=28 --dim WW=28 --dim OC1=128 --dim OC2=512"
C7="--dim IC=256 --dim HH=14 --dim WW=14 --dim OC1=256 --dim OC2=1024"

# name | environment | solder arguments (verification cases)
cases=$(
  echo "conv-small||--small examples/conv_chain.sol"
  echo "conv-C1||$C1 examples/conv_chain.sol"
  echo "conv-C5||examples/conv_chain.sol"
  echo "conv-C6||$C6 examples/conv_chain.sol"
  echo "conv-C7||$C7 examples/conv_chain.sol"
  echo "conv-C5-split2|SOLDER_GATHERED_SPLIT=2|examples/conv_chain.sol"
  echo "conv-C5-split8|SOLDER_GATHERED_SPLIT=8|examples/conv_chain.sol"
  echo "conv-C5-t256|SOLDER_GATHERED_TILE=32,32,32,256|examples/conv_chain.sol"
  echo "conv-C7-t128x64|SOLDER_GATHERED_TILE=128,64,32,128|$C7 examples/conv_chain.sol"
  echo "nerf-small||--small examples/nerf_mlp.sol"
  if [ -n "$programs" ] && [ -d "$programs" ]; then
    n=0
    for f in "$programs"/*.sol; do
      echo "$(basename "$f" .sol)||$f"
      [ $n -lt 4 ] && echo "$(basename "$f" .sol)-split4|SOLDER_GATHERED_SPLIT=4|$f"
      n=$((n + 1))
    done
  fi
)

echo "== 1. compile cache ($(nproc) in parallel)"
echo "$cases" | while IFS='|' read -r name env args; do
  echo "env $env SOLDER_X=1 timeout 100 $SOLDER bench --compile-only $args"
done | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   after $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 2. verification through the CUDA backend (float64 reference)"
echo "$cases" | while IFS='|' read -r name env args; do
  echo "env $env SOLDER_X=1 timeout 100 $SOLDER run --backend cuda --json $args > $out/run-$name.json 2> $out/run-$name.err; echo \"\$? $name\""
done | xargs -d '\n' -P 8 -n 1 sh -c > "$out/verify.txt" 2>&1
sort -k2 "$out/verify.txt" | while read -r rc name; do
  [ "$rc" = 0 ] && echo "   PASS $name" || { echo "   FAIL $name (rc $rc)"; tail -n 3 "$out/run-$name.err" | sed 's/^/      /'; }
done
echo "   $(grep -c '^0 ' "$out/verify.txt") of $(wc -l < "$out/verify.txt") passed"
if grep -l "skeletons are off" "$out"/run-*.err > /dev/null 2>&1; then echo "   FAIL setup: the skeletons were off (no CuTe headers): the fused fallback ran"; fi

echo "== 3. solder bench (conv_chain cells), $(left) s left"
python3 bench/suites.py --suite contractions --cases 'conv_chain' --solder "$SOLDER" --solder-commands --timeout 60 \
  --out "$out/solder-conv.jsonl" | while IFS= read -r line; do sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"; done
python3 - "$out/solder-conv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: r = json.loads(l)
    except Exception: continue
    r = r.get("result", r)
    print(f"   solder {r.get('program')!s:12} {json.dumps(r.get('dims'))[:80]:82} {r.get('median_us')} us (floor {r.get('floor_us')})")
PY

echo "== 4. peers (eager, then torch.compile default), $(left) s left"
timeout $(( $(left) > 60 ? $(left) - 45 : 15 )) python3 bench/peers.py --suite contractions --cases 'conv_chain' --peers eager,compile \
  --compile-mode default --no-ceilings --out "$out/peers-conv.jsonl" --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | tail -n 12

echo "== 5. ncu: C5's 3x3 convolution (h_kernel), $(left) s left"
if [ "$(left)" -gt 25 ] && command -v ncu > /dev/null; then
  timeout $(( $(left) - 5 )) ncu --kernel-name h_kernel --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats "$SOLDER" run --backend cuda examples/conv_chain.sol > "$out/ncu-c5.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Active Warps Per|Stall Long|L1TEX|Block Limit|Compute \(SM\) Throughput|Memory Throughput" "$out/ncu-c5.txt" | head -24
fi
echo "== done after $(( $(date +%s) - start )) s"
