#!/usr/bin/env bash
# One device call for the GEMM skeleton's operand-prologue path (issue 15, part 4): its device test,
# `solder run --backend cuda` of quant_gemm and rmsnorm_gemm at small, ragged and paper sizes (each
# verified against the float64 reference), then `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm
# L1-L2, then the peers in the same call (as bench/device_suites.sh does, Solder first).
#   bench/prologue_device.sh OUTDIR DEADLINE_S
# Run from a folder laid out like the repository (build/solder, device/, examples/, bench/, tests/gpu/gemm,
# src/runtime/tma*); SOLDER_CUTLASS_INCLUDE names the CuTe headers.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1; deadline=$2
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=$PWD/.cache/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== device test of the prologue path ($(left) s left)"
if [ ! -x build-gemm/test_sm90_gemm_prologue ]; then
  OUT_BIN=1 BUILD=$PWD/build-gemm timeout 240 bash tests/gpu/gemm/compile_check.sh prologue > "$out/prologue-build.log" 2>&1
  tail -3 "$out/prologue-build.log"
  grep -E "registers|spill" build-gemm/test_sm90_gemm_prologue.ptxas | paste - - | sed 's/ptxas info    : //' | cut -c1-160 | sort | uniq -c
fi
timeout 120 build-gemm/test_sm90_gemm_prologue 2026 > "$out/prologue-test.txt" 2>&1; echo "rc=$?" >> "$out/prologue-test.txt"
grep -v "^ok  " "$out/prologue-test.txt" | tail -25
echo "== solder run --backend cuda ($(left) s left)"
run() {  # name, args
  local name=$1; shift
  if timeout 150 build/solder run --backend cuda "$@" > /tmp/run-$name.txt 2>&1; then
    echo "ok   $name: $(grep -E 'output ' /tmp/run-$name.txt | head -1 | tr -s ' ')"
  else
    echo "FAIL $name (rc $?):"; tail -8 /tmp/run-$name.txt
  fi
  { echo "## $name: $*"; cat /tmp/run-$name.txt; } >> "$out/runs.txt"
}
run quant-small examples/quant_gemm.sol --small
run quant-ragged examples/quant_gemm.sol --dim M=200 --dim N=136 --dim K=1000
run quant-Q5 examples/quant_gemm.sol
run rms-small examples/rmsnorm_gemm.sol --small
run rms-ragged examples/rmsnorm_gemm.sol --dim T=200 --dim HID=1000 --dim N=136
run rms-L1 examples/rmsnorm_gemm.sol
{ build/solder fuse --gpu examples/quant_gemm.sol; build/solder fuse --gpu examples/rmsnorm_gemm.sol; } > "$out/fuse.txt" 2>&1
echo "== bench: Solder first (quant_gemm Q1-Q10, rmsnorm_gemm L1-L2), then the peers ($(left) s left)"
# Solder's cases before the peers: torch.compile's autotuning takes about a minute per case, and a first
# run of this script (2026-11-26) spent its whole deadline there before Solder's cases started.
mkdir -p /tmp/prologue-bench .cache/bench
python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --compile-only --timeout 300 |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > /tmp/prologue-bench/compile.log 2>&1
while IFS= read -r line; do
  if [ "$(left)" -lt 40 ]; then echo "   deadline: stopped before $line"; break; fi
  sh -c "$line" 2>> /tmp/prologue-bench/solder.err || echo "   failed: $line"
done < <(python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --resume --timeout 150 \
           --out /tmp/prologue-bench/solder-reductions.jsonl)
echo "   solder records: $(wc -l < /tmp/prologue-bench/solder-reductions.jsonl 2>/dev/null || echo 0), $(left) s left"
if [ "$(left)" -gt 60 ]; then
  timeout "$(left)" python3 bench/peers.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --out /tmp/prologue-bench/peers-reductions.jsonl \
    --resume --time-limit $(( $(left) - 45 )) --commit "${SOLDER_COMMIT:-unknown}" 2>&1 | grep -E "µs|error|Error" | tail -n 30
fi
cp /tmp/prologue-bench/*-reductions.jsonl "$out/" 2>/dev/null
python3 bench/report.py --solder "$out/solder-reductions.jsonl" --peers "$out/peers-reductions.jsonl" --out-dir /tmp/prologue-report \
  --suite reductions --no-plots > /dev/null 2>&1 && cp /tmp/prologue-report/reductions.md "$out/" && cat "$out/reductions.md"
echo "== done ($(left) s left)"
