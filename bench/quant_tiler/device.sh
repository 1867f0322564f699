#!/usr/bin/env bash
# quant_gemm / rmsnorm_gemm: the three-kernel plans into two and the row kernel's registers (issue 15,
# eighth session, branch quant-tiler; bench/NOTES.md "the tiler knows the register pass"). One device
# call, at most ~230 s:
#   1. the 8-bit vector stores, packed loads and (new) packed 8-bit tiles against the scalar path
#      (tests/gpu/fp8_vector_store; the packed tiles over every f32 bit pattern);
#   2. `solder run --backend cuda` (verified against float64) of quant_gemm / rmsnorm_gemm at the
#      long-row sizes that were three kernels (Q3, Q4, Q10, L2), at Q1 / Q5 / L1, ragged (long rows,
#      ragged M) and small, and of the row kernels alone;
#   3. `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm L1-L2 whole (Solder first), and the row
#      kernels alone at Q5, Q1, L1 and Q3's row;
#   4. the peers in the same call: torch eager and torch.compile (default mode) by bench/peers.py
#      (their Inductor compiles run beside step 2, nothing of theirs is timed there);
#   5. if time is left, ncu of the row kernels at Q5 and Q3 (registers, occupancy, DRAM).
# Usage (repo root of the device's tree):
#   SOLDER=.devcarry/quant-tiler/solder CARRY=.devcarry/quant-tiler bash .devcarry/quant-tiler/device.sh
# CARRY holds fp8_vector_store (nvcc -std=c++17 -arch=sm_90a -O2 -I device
# tests/gpu/fp8_vector_store/fp8_vector_store.cu -o $CARRY/fp8_vector_store) and copies of the bench
# programs for a tree that lacks them. Results in build-dev/quant-tiler/, and with $OUT set, its
# solder.jsonl, peers.jsonl and verify.txt plus a tarball of the rest under $OUT/quant-tiler/.
set -uo pipefail
S=${SOLDER:-build/solder}
carry=${CARRY:-.devcarry/quant-tiler}
out=build-dev/quant-tiler
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( ${QUANT_TILER_BUDGET_S:-228} - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-/tmp/solder-quant-tiler-cache}
mkdir -p "$SOLDER_CACHE_DIR" bench/programs
for f in quant_rows.sol rmsnorm_rows.sol; do [ -f "bench/programs/$f" ] || cp "$carry/$f" bench/programs/; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
echo "solder: $S ($(cat "$carry/commit.txt" 2>/dev/null || git log -1 --format=%h 2>/dev/null || echo '?'))"
status=0
CASES='quant_gemm|rmsnorm_gemm'

# The peers' compiles beside Solder's verification: one short untimed pass (results discarded) so
# that the timed pass after Solder's finds Inductor's caches warm.
if python3 -c "import torch" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/peers.py --suite reductions --cases "$CASES" --peers compile \
    --compile-mode default --reps 2 --warmup 1 --no-ceilings --out "$out/peers-warm.jsonl" > "$out/peers-warm.txt" 2>&1 &
  warm_pid=$!
fi

echo "== 1. 8-bit vector stores and packed tiles ($(left) s left)"
if [ -x "$carry/fp8_vector_store" ]; then
  "$carry/fp8_vector_store" | tee "$out/fp8_vector_store.txt" || status=1
else
  echo "fp8_vector_store: MISSING ($carry/fp8_vector_store)"; status=1
fi

echo "== 2. verify ($(left) s left)"
Q1="--dim M=4096 --dim N=1536 --dim K=2560"; Q3="--dim M=4096 --dim N=3584 --dim K=8192"
Q4="--dim M=4096 --dim N=8192 --dim K=3584"; Q5="--dim M=4096 --dim N=7168 --dim K=2048"
Q10="--dim M=4096 --dim N=1536 --dim K=4096"; L1="--dim T=2048 --dim HID=4096 --dim N=6144"
L2="--dim T=4096 --dim HID=4096 --dim N=14336"
cat > "$out/verify-list.txt" <<LIST
quant_gemm.Q3 examples/quant_gemm.sol $Q3
rmsnorm_gemm.L2 examples/rmsnorm_gemm.sol $L2
quant_gemm.Q10 examples/quant_gemm.sol $Q10
quant_gemm.Q4 examples/quant_gemm.sol $Q4
quant_gemm.Q5 examples/quant_gemm.sol $Q5
quant_gemm.Q1 examples/quant_gemm.sol $Q1
rmsnorm_gemm.L1 examples/rmsnorm_gemm.sol $L1
quant_gemm.ragged_long examples/quant_gemm.sol --dim M=1003 --dim N=264 --dim K=8200
rmsnorm_gemm.ragged_long examples/rmsnorm_gemm.sol --dim T=2045 --dim HID=4104 --dim N=264
quant_gemm.ragged examples/quant_gemm.sol --dim M=1003 --dim N=264 --dim K=2048
quant_rows.Q3 bench/programs/quant_rows.sol --dim M=4096 --dim K=8192
quant_rows.Q5 bench/programs/quant_rows.sol
quant_rows.ragged bench/programs/quant_rows.sol --dim M=4093 --dim K=2056
quant_rows.ragged_long bench/programs/quant_rows.sol --dim M=1021 --dim K=7176
rmsnorm_rows.L1 bench/programs/rmsnorm_rows.sol
quant_rows.small bench/programs/quant_rows.sol --small
quant_gemm.small examples/quant_gemm.sol --small
rmsnorm_gemm.small examples/rmsnorm_gemm.sol --small
LIST
export S out
timeout $(( $(left) > 150 ? 90 : $(left) - 60 )) xargs -P 12 -L 1 sh -c '
  label=$0
  if timeout 75 $S run --backend cuda "$@" > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr "\n" " ")"; fi' < "$out/verify-list.txt" | tee "$out/verify.txt"
n_ok=$(grep -c ": verified" "$out/verify.txt"); n_all=$(wc -l < "$out/verify-list.txt")
echo "verify: $n_ok of $n_all verified"
[ "$n_ok" = "$n_all" ] || status=1

# Solder's twelve cases into the compile cache (most are there from step 2).
python3 bench/suites.py --suite reductions --cases "$CASES" --solder-commands --compile-only --solder "$S" --timeout 60 \
  --out "$out/compile.jsonl" | timeout 60 xargs -d '\n' -P 12 -n 1 sh -c > "$out/compile.log" 2>&1

if [ -n "${warm_pid:-}" ]; then  # nothing of the peers' beside the timings
  timeout $(( $(left) > 120 ? $(left) - 110 : 1 )) tail --pid="$warm_pid" -f /dev/null
  kill "$warm_pid" 2>/dev/null && echo "   peer warm-up stopped: $(tail -c 300 "$out/peers-warm.txt" | tr '\n' ' ')"
fi

echo "== 3. bench, Solder ($(left) s left)"
python3 bench/suites.py --suite reductions --cases "$CASES" --solder-commands --solder "$S" --timeout 25 \
  --out "$out/solder.jsonl" > "$out/solder-cmds.txt"
while IFS= read -r line; do
  if [ "$(left)" -lt 70 ]; then echo "   deadline: stopped before $line"; break; fi
  sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
done < "$out/solder-cmds.txt"
python3 - "$out/solder.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try: r = json.loads(line)
    except Exception: continue
    d = r.get('dims', {})
    print(f"solder {r['program']:13} {' '.join(f'{k}={v}' for k, v in sorted(d.items())):28} {r['median_us']:9.2f} us  floor {r['floor_us']:8.2f}  kernels {r.get('kernels')}")
PY

echo "== 4. peers, same call ($(left) s left)"
if [ "$(left)" -gt 25 ] && python3 -c "import torch" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 22 )) python3 bench/peers.py --suite reductions --cases "$CASES" \
    --peers eager,compile --compile-mode default --no-ceilings --out "$out/peers.jsonl" \
    --time-limit $(( $(left) - 40 > 10 ? $(left) - 40 : 10 )) 2>&1 | grep -E "µs|Error|error" | tee "$out/peers.txt"
else
  echo "peers: skipped ($(left) s left or no torch)"
fi

echo "== 5. row kernels alone ($(left) s left)"
bench() {  # label, args...
  local label=$1; shift
  [ "$(left)" -gt 12 ] || { echo "bench $label: skipped (deadline)"; return; }
  timeout 10 $S bench "$@" --json > "$out/bench.$label.json" 2> "$out/bench.$label.err"
  python3 - "$label" "$out/bench.$label.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
    print(f"bench {label:10} {r['median_us']:8.2f} us  floor {r['floor_us']:7.2f} us  {r['gbs']:6.0f} GB/s")
except Exception:
    print(f"bench {label:10} ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
}
bench rows.Q5 bench/programs/quant_rows.sol
bench rows.L1 bench/programs/rmsnorm_rows.sol
bench rows.Q1 bench/programs/quant_rows.sol --dim M=4096 --dim K=2560
bench rows.Q3 bench/programs/quant_rows.sol --dim M=4096 --dim K=8192
if [ "$(left)" -gt 14 ]; then
  timeout $(( $(left) - 4 )) ncu --clock-control none -k regex:fused_ --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers \
    --csv --page raw $S run --backend cuda bench/programs/quant_rows.sol > "$out/ncu.Q5.csv" 2> "$out/ncu.Q5.err"
  grep -E "fused" "$out/ncu.Q5.csv" | cut -c1-400 | head -3
fi
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/quant-tiler"
  cp "$out/solder.jsonl" "$out/peers.jsonl" "$out/verify.txt" "$OUT/quant-tiler/" 2>/dev/null
  tar czf "$OUT/quant-tiler/raw.tgz" -C "$out" . 2>/dev/null
fi
echo "quant-tiler device.sh done in $(( $(date +%s) - start )) s, status $status"
exit $status
