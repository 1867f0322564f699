#!/usr/bin/env bash
# One device call for issue 15's seventh session (branch gemm-epilogue), from prebuilt binaries: the GEMM
# skeleton alone at the short-K shapes under each row-store schedule (SOLDER_GEMM_EPILOGUE=direct |
# registers | staged; SOLDER_GEMM_ROW_STORE=0 for the element-wise stores), the peers in the same call,
# the staged epilogue verified at ragged sizes, and ncu profiles of the fp8 Q5 kernel and _scaled_mm's.
#   ROOT=<repository> bash BIN_DIR/gemm_epilogue_device.sh OUTDIR DEADLINE_S BIN_DIR [PHASE]
# PHASE: 1 (default; timings, checks, ncu) or 2 (adds the device test BIN_DIR/test_sm90_gemm and the
# workloads quant_gemm, rmsnorm_gemm, nerf_mlp and gemm_chains' ffn through `solder run --backend cuda`).
# BIN_DIR holds a stripped `solder` (device headers embedded), cache/ (NVRTC cubins), and the branch's
# bench files (programs/*.sol, gemm_epilogue_cases.txt, gemm_epilogue_peers.py). SOLDER_CUTLASS_INCLUDE
# names the CuTe headers. With $OUT set, OUTDIR is tarred into it after every section.
set -uo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
out=$1; deadline=$2; bin=$3; phase=${4:-1}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
mkdir -p "$out" build bench/programs /tmp/ge
cp "$bin/solder" build/solder-ge && chmod +x build/solder-ge
for f in "$bin"/programs/*.sol; do cp "$f" bench/programs/; done
for f in gemm_epilogue_cases.txt gemm_epilogue_peers.py; do [ -f "$bin/$f" ] && cp "$bin/$f" bench/; done
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/$bin/cache}
mkdir -p "$SOLDER_CACHE_DIR"
S=build/solder-ge
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
cases=$(grep -v '^#' bench/gemm_epilogue_cases.txt)
# Time guards (seconds left) before each section: phase 2 has more to do in the same limit.
G_CASES=150; G_RUNS=120; PEERS_RESERVE=90
if [ "$phase" = 2 ]; then
  cases=$(echo "$cases" | grep -v -e elementwise -e registers); G_CASES=115; G_RUNS=75; PEERS_RESERVE=45
fi
RUNS="layer-small|SOLDER_GEMM_EPILOGUE=|bench/programs/f16_bias_relu_layer.sol --small
layer-N1000-H260|SOLDER_GEMM_EPILOGUE=|bench/programs/f16_bias_relu_layer.sol --dim N=1000 --dim H=260
layer-N1000-H264|SOLDER_GEMM_EPILOGUE=|bench/programs/f16_bias_relu_layer.sol --dim N=1000 --dim H=264
fp8-ragged|SOLDER_GEMM_EPILOGUE=|bench/programs/fp8_rowscale_gemm.sol --dim M=200 --dim N=264 --dim K=1008
bf16-ragged|SOLDER_GEMM_EPILOGUE=|bench/programs/bf16_rowscale_gemm.sol --dim T=200 --dim HID=1008 --dim N=264
layer-default|SOLDER_GEMM_EPILOGUE=|bench/programs/f16_bias_relu_layer.sol"
WORKLOADS="quant_gemm-Q5|examples/quant_gemm.sol --dim M=4096 --dim N=7168 --dim K=2048
rmsnorm_gemm-L1|examples/rmsnorm_gemm.sol --dim T=2048 --dim HID=4096 --dim N=6144
ffn-S1|examples/ffn.sol
nerf_mlp|examples/nerf_mlp.sol"
if [ "$phase" = 2 ]; then
  RUNS=$(echo "$RUNS" | grep -v -e layer-default -e layer-N1000-H264)
  RUNS="$RUNS
quant-Q5|SOLDER_GEMM_EPILOGUE=|examples/quant_gemm.sol --dim M=4096 --dim N=7168 --dim K=2048
quant-ragged|SOLDER_GEMM_EPILOGUE=|examples/quant_gemm.sol --dim M=200 --dim N=264 --dim K=1008
rms-L1|SOLDER_GEMM_EPILOGUE=|examples/rmsnorm_gemm.sol --dim T=2048 --dim HID=4096 --dim N=6144
rms-ragged|SOLDER_GEMM_EPILOGUE=|examples/rmsnorm_gemm.sol --dim T=200 --dim HID=1008 --dim N=264
nerf_mlp|SOLDER_GEMM_EPILOGUE=|examples/nerf_mlp.sol
ffn-S1|SOLDER_GEMM_EPILOGUE=|examples/ffn.sol"
fi

echo "== compile misses ($(left) s left)"
{ echo "$cases"; echo "$RUNS"; [ "$phase" = 2 ] && echo "$WORKLOADS" | sed 's/^\([^|]*\)|/\1|SOLDER_GEMM_EPILOGUE=direct|/' &&
  echo "$WORKLOADS" | sed 's/^\([^|]*\)|/\1|SOLDER_GEMM_EPILOGUE=|/'; } | while IFS='|' read -r label env args; do
    jobs=2; case "$args" in *nerf_mlp*) jobs=8 ;; esac  # nerf_mlp: a dozen kernels
    echo "env $env SOLDER_COMPILE_JOBS=$jobs timeout 150 $S bench $args --compile-only"; done |
  timeout $(( phase == 2 ? 100 : 150 )) xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   cache hits $(grep -c 'already in the compile cache' "$out/compile.log"), compiled $(grep -c 'compiled in' "$out/compile.log")"

if [ "$phase" = 2 ] && [ -x "$bin/test_sm90_gemm" ]; then
  echo "== device test: tests/gpu/gemm/test_sm90_gemm.cu, the row-store families first ($(left) s left)"
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} GEMM_TEST_FILTER=" rows" timeout 60 "$bin/test_sm90_gemm" 2026 > "$out/device-test-rows.txt" 2>&1
  echo "   rows: rc=$? $(tail -1 "$out/device-test-rows.txt")"; grep -E "FAIL" "$out/device-test-rows.txt" | head -5
  pack
fi

echo "== Solder: the skeleton alone, each epilogue ($(left) s left)"
echo "$cases" | while IFS='|' read -r label env args; do
  [ "$(left)" -gt $G_CASES ] || { echo "   deadline: skipped $label"; continue; }
  printf '   %-22s ' "$label"
  env $env timeout 40 $S bench $args 2>&1 | grep -E "time +median" | sed 's/^ *//' | tee -a "$out/solder.txt" || echo "failed"
  echo "$label $(tail -1 "$out/solder.txt")" >> "$out/solder-labelled.txt"
done
pack

if [ "$phase" = 2 ]; then
  echo "== Solder: whole workloads, direct (before) and staged (after) ($(left) s left)"
  echo "$WORKLOADS" | while IFS='|' read -r label args; do
    for mode in direct ""; do
      [ "$(left)" -gt $G_CASES ] || { echo "   deadline: skipped $label $mode"; continue; }
      printf '   %-22s %-8s ' "$label" "${mode:-staged}"
      SOLDER_GEMM_EPILOGUE=$mode timeout 40 $S bench $args 2>&1 | grep -E "time +median" | sed 's/^ *//' | tee -a "$out/workloads.txt" || echo failed
      echo "$label-${mode:-staged} $(tail -1 "$out/workloads.txt")" >> "$out/workloads-labelled.txt"
    done
  done
  pack
fi

echo "== ncu ($(left) s left)"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats"
prof() {  # label, kernel regex, command...
  local label=$1 kre=$2; shift 2
  [ "$(left)" -gt 40 ] || { echo "   deadline: skipped ncu $label"; return; }
  timeout $(( $(left) - 25 < 60 ? $(left) - 25 : 60 )) ncu $SECTIONS -k "regex:$kre" -c 1 -f -o "/tmp/ge/ncu-$label" "$@" > "/tmp/ge/ncu-$label.log" 2>&1
  ncu -i "/tmp/ge/ncu-$label.ncu-rep" --page details > "$out/ncu-$label.txt" 2>&1
  ncu -i "/tmp/ge/ncu-$label.ncu-rep" --page source --csv --print-source sass > "$out/ncu-$label-sass.csv" 2>/dev/null
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|One or More Eligible|No Eligible|Warp Cycles Per Issued" "$out/ncu-$label.txt" | head -12 | sed "s/^/   $label /"
}
if [ "$phase" = 1 ]; then
  prof fp8-Q5-staged 'c___kernel' env SOLDER_GEMM_EPILOGUE= $S bench bench/programs/fp8_rowscale_gemm.sol --replays 1 --calls-per-replay 1
  pack
  prof fp8-Q5-direct 'c___kernel' env SOLDER_GEMM_EPILOGUE=direct $S bench bench/programs/fp8_rowscale_gemm.sol --replays 1 --calls-per-replay 1
  pack
fi
echo "== checks: solder run --backend cuda, the default (staged) epilogue ($(left) s left)"
echo "$RUNS" | while IFS='|' read -r label env args; do
  [ "$(left)" -gt $G_RUNS ] || { echo "   deadline: skipped $label"; continue; }
  if env $env timeout 40 $S run --backend cuda $args > "/tmp/ge/run-$label.txt" 2>&1; then
    echo "   ok   $label: $(grep -E 'output ' "/tmp/ge/run-$label.txt" | head -1 | tr -s ' ')"
  else
    echo "   FAIL $label (rc $?):"; tail -5 "/tmp/ge/run-$label.txt"
  fi
  { echo "## $label: $env $args"; cat "/tmp/ge/run-$label.txt"; } >> "$out/runs.txt"
done
pack

echo "== peers ($(left) s left)"
PYTHONUNBUFFERED=1 timeout $(( $(left) - PEERS_RESERVE )) python3 bench/gemm_epilogue_peers.py --cases Q5,Q1,L1,L2,layer --out "$out/peers.jsonl" 2>&1 |
  grep -v Warning | tee "$out/peers.txt"
pack

if [ "$phase" = 2 ] && [ -x "$bin/test_sm90_gemm" ] && [ "$(left)" -gt 30 ]; then
  echo "== device test: every family (seed 2027) ($(left) s left)"
  LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} timeout $(( $(left) - 15 )) "$bin/test_sm90_gemm" 2027 > "$out/device-test-all.txt" 2>&1
  echo "   all: rc=$? $(tail -1 "$out/device-test-all.txt")"; grep -E "FAIL" "$out/device-test-all.txt" | head -5
  grep -c " ok\| OK\|passed" "$out/device-test-all.txt"
  pack
fi
if [ "$phase" = 2 ]; then
  echo "== peers: the workloads, torch.compile default ($(left) s left)"
  [ "$(left)" -gt 100 ] && timeout $(( $(left) - 30 )) python3 bench/peers.py --suite reductions --cases 'quant_gemm-Q(1|5)$|rmsnorm_gemm-L(1|2)$' \
    --out "$out/peers-reductions.jsonl" --compile-mode default --time-limit $(( $(left) - 40 )) --commit "${SOLDER_COMMIT:-gemm-epilogue}" 2>&1 |
    grep -E "µs|us |rror" | tail -n 20
  pack
fi

if [ "$phase" = 1 ]; then
  prof scaled-mm-Q5 '(?i)gemm|cutlass|sm90|xmma' python3 bench/gemm_epilogue_peers.py --once Q5
  pack
fi
prof layer-staged 'y_kernel' env SOLDER_GEMM_EPILOGUE= $S bench bench/programs/f16_bias_relu_layer.sol --replays 1 --calls-per-replay 1
prof layer-direct 'y_kernel' env SOLDER_GEMM_EPILOGUE=direct $S bench bench/programs/f16_bias_relu_layer.sol --replays 1 --calls-per-replay 1
pack
echo "== done ($(left) s left)"
