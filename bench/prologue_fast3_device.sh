#!/usr/bin/env bash
# One device call for issue 15's sixth session (branch quant-fast3), from prebuilt binaries: the
# costs of quant_gemm and rmsnorm_gemm separated, and the two-kernel plans timed.
#   1. compile every case in parallel (cache hits where BIN_DIR/cache holds them);
#   2. `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm L1-L2 FIRST (the cost model's plans: two
#      kernels), then the one-kernel prologue plans of Q1, Q5, L1 (SOLDER_PROLOGUE_PLAN=one), then the
#      plain skeleton alone (bench/programs/fp8_rowscale_gemm.sol at Q1/Q5, bf16_rowscale_gemm.sol at
#      L1/L2);
#   3. `solder run --backend cuda` checks (ragged and paper size, each verified);
#   4. ncu kernel times of Q5 (two kernels; the unfused plan) and L1;
#   5. the peers: bench/peers.py (torch eager, torch.compile in its DEFAULT mode) on Q1, Q5, L1, L2,
#      then the peers' parts (bench/prologue_fast3_peers.py: _scaled_mm / cuBLAS alone, the
#      quantisation or RMSNorm alone), then the other peers' cases while time is left.
#   ROOT=<repository> bash BIN_DIR/prologue_fast3_device.sh OUTDIR DEADLINE_S BIN_DIR
# BIN_DIR holds a stripped `solder` (device headers embedded), programs/*.sol (copied to
# bench/programs/ when missing) and optionally cache/ (NVRTC cubins). SOLDER_CUTLASS_INCLUDE names the
# CuTe headers. With $OUT set, OUTDIR is tarred into it.
set -uo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
out=$1; deadline=$2; bin=$3
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out" build bench/programs /tmp/pb
cp "$bin/solder" build/solder && chmod +x build/solder
for f in "$bin"/programs/*.sol; do [ -f "bench/programs/$(basename "$f")" ] || cp "$f" bench/programs/; done
[ -f bench/prologue_fast3_peers.py ] || cp "$bin/prologue_fast3_peers.py" bench/
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/$bin/cache}
mkdir -p "$SOLDER_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
S=build/solder
Q1="--dim M=4096 --dim N=1536 --dim K=2560"; Q5="--dim M=4096 --dim N=7168 --dim K=2048"
L1="--dim T=2048 --dim HID=4096 --dim N=6144"; L2="--dim T=4096 --dim HID=4096 --dim N=14336"
RQ="--dim M=200 --dim N=264 --dim K=1008"; RR="--dim T=200 --dim HID=1008 --dim N=264"
echo "== compile ($(left) s left)"
{
  python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --compile-only --timeout 200
  echo "SOLDER_PROLOGUE_PLAN=one timeout 200 $S bench examples/quant_gemm.sol $Q1 --compile-only"
  echo "SOLDER_PROLOGUE_PLAN=one timeout 200 $S bench examples/quant_gemm.sol $Q5 --compile-only"
  echo "SOLDER_PROLOGUE_PLAN=one timeout 200 $S bench examples/rmsnorm_gemm.sol $L1 --compile-only"
  echo "timeout 200 $S bench bench/programs/fp8_rowscale_gemm.sol $Q1 --compile-only"
  echo "timeout 200 $S bench bench/programs/fp8_rowscale_gemm.sol $Q5 --compile-only"
  echo "timeout 200 $S bench bench/programs/bf16_rowscale_gemm.sol --compile-only"
  echo "timeout 200 $S bench bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336 --compile-only"
  echo "timeout 200 $S bench examples/quant_gemm.sol $RQ --compile-only"
  echo "timeout 200 $S bench examples/rmsnorm_gemm.sol $RR --compile-only"
  echo "timeout 200 $S bench examples/quant_gemm.sol $Q5 --no-fuse --compile-only"
} > /tmp/pb/compile-list.txt
SOLDER_COMPILE_JOBS=1 timeout $(( $(left) - 150 )) xargs -d '\n' -P "$(nproc)" -n 1 sh -c < /tmp/pb/compile-list.txt > /tmp/pb/compile.log 2>&1
grep -c "already in the compile cache" /tmp/pb/compile.log; grep -c "compiled in" /tmp/pb/compile.log
echo "== bench: Solder, the cost model's plans ($(left) s left)"
while IFS= read -r line; do
  if [ "$(left)" -lt 150 ]; then echo "   deadline: stopped before $line"; break; fi
  sh -c "$line" 2>> /tmp/pb/solder.err || echo "   failed: $line"
done < <(python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --resume --timeout 60 \
           --out /tmp/pb/solder-reductions.jsonl)
python3 - <<'PY'
import json
for l in open('/tmp/pb/solder-reductions.jsonl'):
    r = json.loads(l)
    print("  ", r.get("case") or r.get("id"), r.get("status"), r.get("median_us"), r.get("floor_us"))
PY
cp /tmp/pb/solder-reductions.jsonl "$out/"
bench_one() {  # label, env, args...
  local label=$1 env=$2; shift 2
  [ "$(left)" -gt 120 ] || { echo "   deadline: skipped $label"; return; }
  printf '   %-34s ' "$label"; env $env timeout 60 $S bench "$@" 2>&1 | grep -E "time +median" | sed 's/^ *//' | tee -a "$out/ab.txt" ||
    echo "failed"
}
echo "== bench: one kernel (SOLDER_PROLOGUE_PLAN=one), then the plain skeleton alone ($(left) s left)"
bench_one "quant Q5 one kernel" SOLDER_PROLOGUE_PLAN=one examples/quant_gemm.sol $Q5
bench_one "quant Q1 one kernel" SOLDER_PROLOGUE_PLAN=one examples/quant_gemm.sol $Q1
bench_one "rms L1 one kernel" SOLDER_PROLOGUE_PLAN=one examples/rmsnorm_gemm.sol $L1
bench_one "fp8 skeleton alone Q5" X=1 bench/programs/fp8_rowscale_gemm.sol $Q5
bench_one "fp8 skeleton alone Q1" X=1 bench/programs/fp8_rowscale_gemm.sol $Q1
bench_one "bf16 skeleton alone L1" X=1 bench/programs/bf16_rowscale_gemm.sol
bench_one "bf16 skeleton alone L2" X=1 bench/programs/bf16_rowscale_gemm.sol --dim T=4096 --dim N=14336
echo "== solder run --backend cuda ($(left) s left)"
run() {  # name, args
  local name=$1; shift
  [ "$(left)" -gt 110 ] || { echo "   deadline: skipped $name"; return; }
  if timeout 40 $S run --backend cuda "$@" > /tmp/run-$name.txt 2>&1; then
    echo "ok   $name: $(grep -E 'output ' /tmp/run-$name.txt | head -1 | tr -s ' ')"
  else
    echo "FAIL $name (rc $?):"; tail -5 /tmp/run-$name.txt
  fi
  { echo "## $name: $*"; cat /tmp/run-$name.txt; } >> "$out/runs.txt"
}
run quant-ragged-split examples/quant_gemm.sol $RQ
run rms-ragged-split examples/rmsnorm_gemm.sol $RR
run quant-Q5 examples/quant_gemm.sol $Q5
run rms-L1 examples/rmsnorm_gemm.sol $L1
echo "== ncu kernel times ($(left) s left)"
prof() {  # label, args
  local label=$1; shift
  [ "$(left)" -gt 100 ] || { echo "   deadline: skipped $label"; return; }
  timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw $S run --backend cuda "$@" \
    > "$out/ncu-$label.csv" 2> /tmp/pb/ncu-$label.err
  python3 - "$out/ncu-$label.csv" "$label" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 3: print("   no kernels profiled:", sys.argv[2]); sys.exit(0)
h = rows[0]; k = h.index("Kernel Name"); t = h.index("gpu__time_duration.sum")
for r in rows[2:]:
    print(f"   {sys.argv[2]:14s} {r[k][:40]:40s} {r[t]:>10s} {rows[1][t]}")
PY
}
prof quant-Q5 examples/quant_gemm.sol $Q5
prof quant-Q5-unfused examples/quant_gemm.sol $Q5 --no-fuse
prof rms-L1 examples/rmsnorm_gemm.sol $L1
echo "== peers ($(left) s left)"
peers() {  # cases regex
  [ "$(left)" -gt 30 ] || return
  timeout $(( $(left) - 10 )) python3 bench/peers.py --suite reductions --cases "$1" --out /tmp/pb/peers-reductions.jsonl \
    --compile-mode default --resume --time-limit $(( $(left) - 20 )) --commit "${SOLDER_COMMIT:-unknown}" 2>&1 |
    grep -E "µs|error|Error" | tail -n 30
}
peers 'quant_gemm-Q(1|5)$|rmsnorm_gemm-L(1|2)'
if [ "$(left)" -gt 45 ]; then
  echo "== the peers' parts ($(left) s left)"
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 5 )) python3 bench/prologue_fast3_peers.py --out "$out/peer-parts.jsonl" 2>&1 | grep -v Warning
fi
peers 'quant_gemm|rmsnorm_gemm'
cp /tmp/pb/peers-reductions.jsonl "$out/" 2>/dev/null
python3 bench/report.py --solder "$out/solder-reductions.jsonl" --peers "$out/peers-reductions.jsonl" --out-dir /tmp/pr \
  --suite reductions --no-plots > /dev/null 2>&1 && cp /tmp/pr/reductions.md "$out/" && cat "$out/reductions.md"
echo "== done ($(left) s left)"
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"
