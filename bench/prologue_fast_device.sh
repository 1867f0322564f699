#!/usr/bin/env bash
# One device call for issue 15's prologue speed work (branch quant-fast), from prebuilt binaries: the
# prologue device test, `solder bench` of quant_gemm Q1-Q10 and rmsnorm_gemm L1-L2 FIRST, the same
# quant cases with BIN_DIR/solder-nc when present (an A/B in the same call), the unfused plan of Q1 and
# Q5, `solder run --backend cuda` checks (ragged and paper size, each verified), ncu of Q5 and L1, then
# the peers (torch eager and torch.compile, mode $COMPILE_MODE, default `default`).
#   ROOT=<repository> bash BIN_DIR/prologue_fast_device.sh OUTDIR DEADLINE_S BIN_DIR
# BIN_DIR holds a stripped `solder` and `test_sm90_gemm_prologue` built elsewhere (the device headers
# are embedded in solder); SOLDER_CUTLASS_INCLUDE names the CuTe headers. With $OUT set, OUTDIR is
# tarred into it.
set -uo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
out=$1; deadline=$2; bin=$3
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out" build
cp "$bin/solder" build/solder && chmod +x build/solder "$bin"/*
export SOLDER_CACHE_DIR=$PWD/.cache/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== device test ($(left) s left)"
timeout 120 "$bin/test_sm90_gemm_prologue" 2026 > "$out/prologue-test.txt" 2>&1; echo "rc=$?" >> "$out/prologue-test.txt"
grep -v "^ok  " "$out/prologue-test.txt" | tail -12; grep -c "^ok  " "$out/prologue-test.txt"
echo "== bench: Solder first ($(left) s left)"
mkdir -p /tmp/pb .cache/bench
python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --compile-only --timeout 300 |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > /tmp/pb/compile.log 2>&1
while IFS= read -r line; do
  if [ "$(left)" -lt 200 ]; then echo "   deadline: stopped before $line"; break; fi
  sh -c "$line" 2>> /tmp/pb/solder.err || echo "   failed: $line"
done < <(python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --resume --timeout 150 \
           --out /tmp/pb/solder-reductions.jsonl)
python3 - <<'PY'
import json
for l in open('/tmp/pb/solder-reductions.jsonl'):
    r = json.loads(l)
    print("  ", r.get("case") or r.get("id"), r.get("status"), r.get("median_us"), r.get("floor_us"))
PY
cp /tmp/pb/solder-reductions.jsonl "$out/"
if [ -x "$bin/solder-nc" ] && [ "$(left)" -gt 260 ]; then
  echo "== bench: quant_gemm with $bin/solder-nc (no cluster), same call ($(left) s left)"
  python3 bench/suites.py --suite reductions --cases "quant_gemm" --solder "$bin/solder-nc" --solder-commands --compile-only --timeout 300 |
    xargs -d '\n' -P "$(nproc)" -n 1 sh -c > /tmp/pb/compile-nc.log 2>&1
  while IFS= read -r line; do
    sh -c "$line" 2>> /tmp/pb/solder-nc.err || echo "   failed: $line"
  done < <(python3 bench/suites.py --suite reductions --cases "quant_gemm" --solder "$bin/solder-nc" --solder-commands --resume \
             --timeout 150 --out /tmp/pb/solder-nc-reductions.jsonl)
  python3 - <<'PY'
import json
for l in open('/tmp/pb/solder-nc-reductions.jsonl'):
    r = json.loads(l)
    print("   nc", r.get("case") or r.get("id"), r.get("status"), r.get("median_us"))
PY
  cp /tmp/pb/solder-nc-reductions.jsonl "$out/"
fi
echo "== the unfused plan for comparison (amax, scale, aq kernels, then the plain fp8 skeleton) ($(left) s left)"
for dims in "M=4096 N=1536 K=2560" "M=4096 N=7168 K=2048"; do
  set -- $dims
  timeout 60 build/solder bench examples/quant_gemm.sol --no-fuse --dim $1 --dim $2 --dim $3 2>&1 | tail -4 | tee -a "$out/unfused.txt"
done
echo "== solder run --backend cuda ($(left) s left)"
run() {  # name, args
  local name=$1; shift
  if timeout 100 build/solder run --backend cuda "$@" > /tmp/run-$name.txt 2>&1; then
    echo "ok   $name: $(grep -E 'output ' /tmp/run-$name.txt | head -1 | tr -s ' ')"
  else
    echo "FAIL $name (rc $?):"; tail -5 /tmp/run-$name.txt
  fi
  { echo "## $name: $*"; cat /tmp/run-$name.txt; } >> "$out/runs.txt"
}
run quant-ragged examples/quant_gemm.sol --dim M=200 --dim N=136 --dim K=1000
run quant-Q5 examples/quant_gemm.sol
run rms-ragged examples/rmsnorm_gemm.sol --dim T=200 --dim HID=1000 --dim N=136
run rms-L1 examples/rmsnorm_gemm.sol
echo "== ncu ($(left) s left)"
if [ "$(left)" -gt 170 ]; then
  timeout 120 bash bench/profile.sh /tmp/prof 'quant-Q5|quant_gemm|' 'rms-L1|rmsnorm_gemm|' 2>&1 | tail -40
  cp /tmp/prof/*.csv "$out/" 2>/dev/null
fi
echo "== peers ($(left) s left)"
if [ "$(left)" -gt 50 ]; then
  # the headline cases first, then the rest (peers.py keeps the suite's order within one run)
  for cases in 'quant_gemm-Q(1|5)$|rmsnorm_gemm-L1' 'quant_gemm|rmsnorm_gemm'; do
    [ "$(left)" -gt 50 ] || break
    timeout "$(left)" python3 bench/peers.py --suite reductions --cases "$cases" --out /tmp/pb/peers-reductions.jsonl \
      --compile-mode "${COMPILE_MODE:-default}" --resume --time-limit $(( $(left) - 40 )) --commit "${SOLDER_COMMIT:-unknown}" 2>&1 |
      grep -E "µs|error|Error" | tail -n 40
  done
fi
cp /tmp/pb/peers-reductions.jsonl "$out/" 2>/dev/null
python3 bench/report.py --solder "$out/solder-reductions.jsonl" --peers "$out/peers-reductions.jsonl" --out-dir /tmp/pr \
  --suite reductions --no-plots > /dev/null 2>&1 && cp /tmp/pr/reductions.md "$out/" && cat "$out/reductions.md"
echo "== done ($(left) s left)"
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"
