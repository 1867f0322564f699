#!/usr/bin/env bash
# The row kernel in registers (issue 15, seventh session, branch row-kernel; bench/NOTES.md "the row
# kernel in registers"): one device call, at most ~120 s, on the merged tree.
#   1. the 8-bit vector stores and packed loads against the scalar ones (tests/gpu/fp8_vector_store);
#   2. `solder run --backend cuda` of the row kernels alone (bench/programs/quant_rows.sol,
#      rmsnorm_rows.sol) and of quant_gemm / rmsnorm_gemm (two kernels, the cost model's plan) at small,
#      ragged and paper sizes (Q1, Q5, L1), and of the other kernels the pass now takes (softmax, the
#      pointwise programs);
#   3. `solder bench`: the row kernels alone at Q5, Q1, L1, then the whole programs at Q5, Q1, L1;
#   4. the peer: torch.compile (default mode) of the quantisation / RMSNorm alone (bench/row_kernel_peers.py);
#   5. if time is left, ncu of the row kernel at Q5 and L1 (time, DRAM throughput, registers, occupancy).
# Usage (repo root): SOLDER=build/solder CARRY=.devcarry/row-kernel bash $CARRY/device.sh
#   CARRY holds fp8_vector_store (built by: nvcc -std=c++17 -arch=sm_90a -O2 -I device
#   tests/gpu/fp8_vector_store/fp8_vector_store.cu -o $CARRY/fp8_vector_store) and copies of the bench
#   programs and peer script for a tree that lacks them. Results under $OUT/row-kernel/ (or build-dev/row-kernel).
set -uo pipefail
S=${SOLDER:-build/solder}
carry=${CARRY:-.devcarry/row-kernel}
out=${OUT:-build-dev}/row-kernel
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( ${ROW_KERNEL_BUDGET_S:-118} - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-/tmp/solder-row-kernel-cache}
mkdir -p "$SOLDER_CACHE_DIR" bench/programs
for f in quant_rows.sol rmsnorm_rows.sol; do [ -f "bench/programs/$f" ] || cp "$carry/$f" bench/programs/; done
for f in row_kernel_peers.py prologue_fast3_peers.py; do [ -f "bench/$f" ] || cp "$carry/$f" bench/ 2>/dev/null; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
echo "solder: $S ($(git log -1 --format=%h 2>/dev/null || echo '?'))"
status=0

# The peer's compiles (torch.compile, Inductor) beside Solder's verification: nothing is timed there;
# its caches are warm for the timed run after Solder's benches.
if python3 -c "import torch" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/row_kernel_peers.py --cases Q5,L1,Q1 --warm-only > "$out/peers-warm.txt" 2>&1 &
  warm_pid=$!
fi

echo "== 1. 8-bit vector stores ($(left) s left)"
if [ -x "$carry/fp8_vector_store" ]; then
  "$carry/fp8_vector_store" | tee "$out/fp8_vector_store.txt" || status=1
else
  echo "fp8_vector_store: MISSING ($carry/fp8_vector_store)"; status=1
fi

echo "== 2. verify ($(left) s left)"
Q1="--dim M=4096 --dim N=1536 --dim K=2560"; Q5="--dim M=4096 --dim N=7168 --dim K=2048"; L1="--dim T=2048 --dim HID=4096 --dim N=6144"
cat > "$out/verify-list.txt" <<LIST
quant_gemm.Q5 examples/quant_gemm.sol $Q5
quant_gemm.Q1 examples/quant_gemm.sol $Q1
rmsnorm_gemm.L1 examples/rmsnorm_gemm.sol $L1
quant_rows.Q5 bench/programs/quant_rows.sol
rmsnorm_rows.L1 bench/programs/rmsnorm_rows.sol
quant_rows.Q1 bench/programs/quant_rows.sol --dim M=4096 --dim K=2560
quant_rows.ragged bench/programs/quant_rows.sol --dim M=4093 --dim K=2056
rmsnorm_rows.ragged bench/programs/rmsnorm_rows.sol --dim T=2045 --dim HID=2056
quant_rows.small bench/programs/quant_rows.sol --small
rmsnorm_rows.small bench/programs/rmsnorm_rows.sol --small
quant_gemm.ragged examples/quant_gemm.sol --dim M=1003 --dim N=264 --dim K=2048
rmsnorm_gemm.ragged examples/rmsnorm_gemm.sol --dim T=2045 --dim HID=2056 --dim N=264
softmax.default examples/softmax.sol
rmsnorm.default bench/programs/rmsnorm.sol
silu_mul.ragged bench/programs/silu_mul.sol --dim T=64 --dim F=5000
LIST
# Each line: label, then the arguments of `solder run --backend cuda`; 8 at a time (NVRTC compiles).
export S out
timeout $(( $(left) - 66 )) xargs -P 8 -L 1 sh -c '
  label=$0
  if timeout 50 $S run --backend cuda "$@" > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr "\n" " ")"; fi' < "$out/verify-list.txt" | tee "$out/verify.txt"
n_ok=$(grep -c ": verified" "$out/verify.txt"); n_all=$(wc -l < "$out/verify-list.txt")
echo "verify: $n_ok of $n_all verified"
[ "$n_ok" = "$n_all" ] || status=1
for label in quant_gemm.Q5 rmsnorm_gemm.L1; do
  grep -h -E "register pass|two kernels|one kernel" "$out/run.$label.txt" 2>/dev/null | head -2 | sed "s/^/   $label: /"
done

if [ -n "${warm_pid:-}" ]; then  # no compile beside the timings
  timeout $(( $(left) > 60 ? $(left) - 60 : 1 )) tail --pid="$warm_pid" -f /dev/null
  kill "$warm_pid" 2>/dev/null && echo "   peer warm-up stopped ($(cat "$out/peers-warm.txt" | tr '\n' ' '))"
fi

echo "== 3. bench, Solder ($(left) s left)"
bench() {  # label, args...
  local label=$1; shift
  [ "$(left)" -gt 45 ] || { echo "bench $label: skipped (deadline)"; return; }
  timeout 25 $S bench "$@" --json > "$out/bench.$label.json" 2> "$out/bench.$label.err"
  python3 - "$label" "$out/bench.$label.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
    print(f"bench {label:18} {r['median_us']:8.2f} us  floor {r['floor_us']:7.2f} us  x{r['median_us'] / r['floor_us']:5.2f}  {r['gbs']:6.0f} GB/s  kernels {r['kernels']}")
except Exception:
    print(f"bench {label:18} ERROR {open(path.replace('.json', '.err')).read().strip()[-200:]}")
PY
}
bench rows.Q5 bench/programs/quant_rows.sol
bench rows.L1 bench/programs/rmsnorm_rows.sol
bench rows.Q1 bench/programs/quant_rows.sol --dim M=4096 --dim K=2560
bench quant_gemm.Q5 examples/quant_gemm.sol $Q5
bench rmsnorm_gemm.L1 examples/rmsnorm_gemm.sol $L1
bench quant_gemm.Q1 examples/quant_gemm.sol $Q1

echo "== 4. peer: torch.compile's quantisation / RMSNorm alone ($(left) s left)"
if [ "$(left)" -gt 25 ] && python3 -c "import torch" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 12 )) python3 bench/row_kernel_peers.py --cases Q5,L1,Q1 --out "$out/peers.jsonl" 2>&1 |
    grep -E "^peer|Error" | tee "$out/peers.txt"
else
  echo "peer: skipped ($(left) s left or no torch)"
fi

echo "== 5. ncu of the row kernels ($(left) s left)"
prof() {  # label, args...
  local label=$1; shift
  [ "$(left)" -gt 8 ] || { echo "ncu $label: skipped (deadline)"; return; }
  timeout $(( $(left) - 3 )) ncu --clock-control none -k regex:fused_ --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers \
    --csv --page raw $S run --backend cuda "$@" > "$out/ncu.$label.csv" 2> "$out/ncu.$label.err"
  python3 - "$out/ncu.$label.csv" "$label" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 3: print(f"ncu {sys.argv[2]}: no kernel profiled"); sys.exit(0)
h = rows[0]
for r in rows[2:]:
    f = {k: r[h.index(k)] for k in h if k.startswith(("gpu__", "dram__", "launch__", "sm__"))}
    print(f"ncu {sys.argv[2]:8} {r[h.index('Kernel Name')][:12]:12} {f['gpu__time_duration.sum']:>9} {rows[1][h.index('gpu__time_duration.sum')]}"
          f"  DRAM {f['dram__throughput.avg.pct_of_peak_sustained_elapsed']} %  regs {f['launch__registers_per_thread']}"
          f"  blocks/SM by regs {f['launch__occupancy_limit_registers']}  warps active {f['sm__warps_active.avg.pct_of_peak_sustained_active']} %")
PY
}
prof rows.Q5 bench/programs/quant_rows.sol
prof rows.L1 bench/programs/rmsnorm_rows.sol
echo "row-kernel device.sh done in $(( $(date +%s) - start )) s, status $status"
exit $status
