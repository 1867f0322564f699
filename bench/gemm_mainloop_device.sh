#!/usr/bin/env bash
# One device call for issue 15's eighth session (branch gemm-mainloop), from prebuilt binaries: the
# ping-pong schedule (Config::Pingpong) in the device test, fp8 and bf16 8192³ against the cooperative
# tiles and the peers (bench/gemm/peer.py), the skeleton alone at fp8 Q5 and bf16 L2 (each schedule, L2
# three times and without its cluster), gemm_chains' ffn S1/S2/S6/S7 and gated_ffn S6, then the peers,
# then short ncu profiles (fp8 8192³ cooperative and ping-pong; L2), then the whole device test.
#   ROOT=<repository> bash BIN_DIR/gemm_mainloop_device.sh OUTDIR DEADLINE_S BIN_DIR
# BIN_DIR holds stripped `solder`, `test_sm90_gemm`, `bench_gemm`, libgomp.so.1 and cache/ (NVRTC cubins,
# filled on the build machine by `solder bench ... --compile-only`). SOLDER_CUTLASS_INCLUDE names the CuTe
# headers. With $OUT set, OUTDIR is tarred into it after every section. Solder first, then the peers.
set -uo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
out=$1; deadline=$2; bin=$3
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
mkdir -p "$out" /tmp/gm
chmod +x "$bin"/solder "$bin"/test_sm90_gemm "$bin"/bench_gemm 2>/dev/null
export LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-}
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/$bin/cache}
mkdir -p "$SOLDER_CACHE_DIR"
S=$bin/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"

echo "== device test: the ping-pong families ($(left) s left)"
GEMM_TEST_FILTER=pingpong timeout 45 "$bin/test_sm90_gemm" 2026 > "$out/device-test-pingpong.txt" 2>&1
echo "   rc=$? $(tail -1 "$out/device-test-pingpong.txt")"; grep -E "FAIL" "$out/device-test-pingpong.txt" | head -5
pack

echo "== bench_gemm pingpong: 8192³, cooperative 128x256 against ping-pong 64xBN ($(left) s left)"
timeout 50 "$bin/bench_gemm" pingpong "$out/pingpong.json" 2>&1 | tee "$out/pingpong.txt" | grep -E "^solder"
pack

# label | env | solder bench args
CASES="fp8-Q5|SOLDER_GEMM_EPILOGUE=|bench/programs/fp8_rowscale_gemm.sol
fp8-Q5-pingpong|SOLDER_GEMM_SCHEDULE=pingpong|bench/programs/fp8_rowscale_gemm.sol
fp8-Q5-cooperative|SOLDER_GEMM_SCHEDULE=cooperative|bench/programs/fp8_rowscale_gemm.sol
bf16-L2|SOLDER_GEMM_EPILOGUE=|bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336
bf16-L2-again|SOLDER_GEMM_EPILOGUE=|bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336
bf16-L2-c1x1|SOLDER_GEMM_CLUSTER=1x1|bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336
bf16-L2-pingpong|SOLDER_GEMM_SCHEDULE=pingpong|bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336
ffn-S1|SOLDER_GEMM_EPILOGUE=|examples/ffn.sol --dim M=128 --dim N=8192 --dim K=3072 --dim L=3072
ffn-S2|SOLDER_GEMM_EPILOGUE=|examples/ffn.sol --dim M=128 --dim N=5632 --dim K=2048 --dim L=2048
ffn-S6|SOLDER_GEMM_EPILOGUE=|examples/ffn.sol --dim M=128 --dim N=8960 --dim K=1536 --dim L=1536
ffn-S7|SOLDER_GEMM_EPILOGUE=|examples/ffn.sol --dim M=128 --dim N=9728 --dim K=2560 --dim L=2560
gated_ffn-S6|SOLDER_GEMM_EPILOGUE=|examples/gated_ffn.sol --dim M=128 --dim N=8960 --dim K=1536 --dim L=1536
ffn-S6-pingpong|SOLDER_GEMM_SCHEDULE=pingpong|examples/ffn.sol --dim M=128 --dim N=8960 --dim K=1536 --dim L=1536"
echo "== compile (NVRTC, in parallel; the cache is empty on a fresh machine) ($(left) s left)"
echo "$CASES" | while IFS='|' read -r label env args; do echo "env $env SOLDER_COMPILE_JOBS=2 timeout 55 $S bench $args --compile-only"; done |
  timeout 60 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled: $(grep -c 'compiled in' "$out/compile.log") of $(echo "$CASES" | wc -l) programs ($(grep -o 'compiled in [0-9.]* s' "$out/compile.log" | sort -t' ' -k3 -n | tail -1))"
echo "== Solder: solder bench, the skeleton alone and the ffn cells ($(left) s left)"
echo "$CASES" | while IFS='|' read -r label env args; do
  [ "$(left)" -gt 100 ] || { echo "   deadline: skipped $label"; continue; }
  printf '   %-20s ' "$label"
  env $env timeout 30 $S bench $args > "/tmp/gm/bench-$label.txt" 2>&1
  grep -E "time +median" "/tmp/gm/bench-$label.txt" | sed 's/^ *//' | tee -a "$out/solder.txt" || echo "failed: $(tail -2 "/tmp/gm/bench-$label.txt")"
  { echo "## $label: $env $args"; cat "/tmp/gm/bench-$label.txt"; } >> "$out/solder-full.txt"
done
pack

echo "== peers: peer.py 8192³ ($(left) s left)"
timeout 30 python3 bench/gemm/peer.py "$out/peer.json" 2>&1 | grep -v Warning | tee "$out/peer.txt"
pack
echo "== peers: Q5 and L2 alone ($(left) s left)"
PYTHONUNBUFFERED=1 timeout 30 python3 bench/gemm_epilogue_peers.py --cases Q5,L2 --out "$out/peers-q5-l2.jsonl" 2>&1 | grep -v Warning | tee "$out/peers-q5-l2.txt"
pack
echo "== peers: gemm_chains ffn S1/S2/S6/S7, gated_ffn S6, torch eager (cuBLAS) ($(left) s left)"
timeout 35 python3 bench/peers.py --suite gemm_chains --cases '^(ffn-S(1|2|6|7)|gated_ffn-S6)$' --peers eager \
  --out "$out/peers-chains.jsonl" --time-limit 25 --commit "${SOLDER_COMMIT:-gemm-mainloop}" 2>&1 | grep -E "µs|us |rror" | tail -n 12
pack

echo "== peers: cuBLAS's kernels at ffn S1 and S7 (torch.profiler: name, grid, time) ($(left) s left)"
for dims in "128 8192 3072 3072"; do
  [ "$(left)" -gt 60 ] || { echo "   deadline: skipped peer kernels $dims"; continue; }
  timeout 20 python3 bench/peer_kernels.py ffn $dims --peers eager --calls 3 2>&1 | grep -v Warning | tee -a "$out/peer-kernels.txt"
done
pack

echo "== ncu ($(left) s left)"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section LaunchStats"
prof() {  # label, kernel regex, launch count, command...
  local label=$1 kre=$2 count=$3; shift 3
  [ "$(left)" -gt 30 ] || { echo "   deadline: skipped ncu $label"; return; }
  timeout $(( $(left) - 15 < 25 ? $(left) - 15 : 25 )) ncu --clock-control none $SECTIONS -k "regex:$kre" -c "$count" -f -o "/tmp/gm/ncu-$label" "$@" > "/tmp/gm/ncu-$label.log" 2>&1
  ncu -i "/tmp/gm/ncu-$label.ncu-rep" --page details > "$out/ncu-$label.txt" 2>&1
  grep -E "gemm_kernel|_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|One or More Eligible|Issue Slots Busy|Registers Per" "$out/ncu-$label.txt" | head -24 | sed "s/^/   $label /"
}
prof fp8-8192-coop 'gemm_kernel.*128, 256' 1 "$bin/bench_gemm" pingpong-profile
pack
prof fp8-8192-pingpong 'gemm_kernel.*64, 256' 1 "$bin/bench_gemm" pingpong-profile
pack
prof bf16-L2 '_kernel' 1 env SOLDER_GEMM_EPILOGUE= $S bench bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336 --replays 1 --calls-per-replay 1
pack

if [ "$(left)" -gt 25 ]; then
  echo "== device test: every family (seed 2027) ($(left) s left)"
  timeout $(( $(left) - 10 )) "$bin/test_sm90_gemm" 2027 > "$out/device-test-all.txt" 2>&1
  echo "   all: rc=$? $(tail -1 "$out/device-test-all.txt")"; grep -E "FAIL" "$out/device-test-all.txt" | head -5
  pack
fi
echo "== done ($(left) s left)"
