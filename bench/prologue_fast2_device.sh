#!/usr/bin/env bash
# One device call for issue 15's prologue speed work (branch quant-fast2), from prebuilt binaries, in
# the order the brief asks: the prologue device test, `solder bench` of quant_gemm Q1-Q10 and
# rmsnorm_gemm L1-L2 FIRST, `solder run --backend cuda` checks (ragged and paper size, each verified),
# the peers of the headline cases (Q1, Q5, L1), ncu of Q5, then the remaining peers as time allows
# (torch eager and torch.compile, mode $COMPILE_MODE, default `default`).
#   ROOT=<repository> bash BIN_DIR/prologue_fast2_device.sh OUTDIR DEADLINE_S BIN_DIR
# BIN_DIR holds a stripped `solder` and `test_sm90_gemm_prologue` built elsewhere (the device headers
# are embedded in solder); SOLDER_CUTLASS_INCLUDE names the CuTe headers. With $OUT set, OUTDIR is
# tarred into it. Solder's timings stop when fewer than 150 s are left. With AB_CASES set (a case
# regex), those cases are timed again with SOLDER_PROLOGUE_SCHEDULE=converter right after.
set -uo pipefail
cd "${ROOT:-$(dirname "$0")/..}"
out=$1; deadline=$2; bin=$3
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
finish() {
  [ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"
}
trap finish EXIT
mkdir -p "$out" build
cp "$bin/solder" build/solder && chmod +x build/solder "$bin"/*
export SOLDER_CACHE_DIR=$PWD/.cache/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
echo "== device test ($(left) s left)"
timeout 100 "$bin/test_sm90_gemm_prologue" 2026 > "$out/prologue-test.txt" 2>&1; echo "rc=$?" >> "$out/prologue-test.txt"
grep -v "^ok  " "$out/prologue-test.txt" | tail -12; grep -c "^ok  " "$out/prologue-test.txt"
echo "== bench: Solder first ($(left) s left)"
mkdir -p /tmp/pb .cache/bench
python3 bench/suites.py --suite reductions --cases "quant_gemm|rmsnorm_gemm" --solder-commands --compile-only --timeout 300 |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > /tmp/pb/compile.log 2>&1
while IFS= read -r line; do
  if [ "$(left)" -lt 150 ]; then echo "   deadline: stopped before $line"; break; fi
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
if [ -n "${AB_CASES:-}" ] && [ "$(left)" -gt 220 ]; then
  # A/B in the same call: the cases AB_CASES (a regex, e.g. 'quant_gemm-Q(1|5)$|rmsnorm_gemm-L1') with
  # SOLDER_PROLOGUE_SCHEDULE=converter (docs/runtime.md).
  echo "== bench: the converter schedule, $AB_CASES ($(left) s left)"
  python3 bench/suites.py --suite reductions --cases "$AB_CASES" --solder-commands --compile-only --timeout 300 |
    SOLDER_PROLOGUE_SCHEDULE=converter xargs -d '\n' -P "$(nproc)" -n 1 sh -c > /tmp/pb/compile-conv.log 2>&1
  while IFS= read -r line; do
    if [ "$(left)" -lt 150 ]; then echo "   deadline: stopped before $line"; break; fi
    SOLDER_PROLOGUE_SCHEDULE=converter sh -c "$line" 2>> /tmp/pb/solder-conv.err || echo "   failed: $line"
  done < <(python3 bench/suites.py --suite reductions --cases "$AB_CASES" --solder-commands --resume --timeout 150 \
             --out /tmp/pb/solder-converter.jsonl)
  python3 - <<'PY'
import json
for l in open('/tmp/pb/solder-converter.jsonl'):
    r = json.loads(l)
    print("   converter", r.get("case") or r.get("id"), r.get("status"), r.get("median_us"))
PY
  cp /tmp/pb/solder-converter.jsonl "$out/"
fi
echo "== solder run --backend cuda ($(left) s left)"
run() {  # name, args
  local name=$1; shift
  if timeout 60 build/solder run --backend cuda "$@" > /tmp/run-$name.txt 2>&1; then
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
peers() {  # case regex
  [ "$(left)" -gt 40 ] || return
  timeout "$(left)" python3 bench/peers.py --suite reductions --cases "$1" --out /tmp/pb/peers-reductions.jsonl \
    --compile-mode "${COMPILE_MODE:-default}" --resume --time-limit $(( $(left) - 30 )) --commit "${SOLDER_COMMIT:-unknown}" 2>&1 |
    grep -E "µs|error|Error" | tail -n 40
  cp /tmp/pb/peers-reductions.jsonl "$out/" 2>/dev/null
}
echo "== peers, headline cases ($(left) s left)"
peers 'quant_gemm-Q(1|5)$|rmsnorm_gemm-L1'
echo "== ncu of Q5 ($(left) s left)"
if [ "$(left)" -gt 100 ]; then
  timeout 70 bash bench/profile.sh /tmp/prof 'quant-Q5|quant_gemm|' 2>&1 | tail -20
  cp /tmp/prof/*.csv "$out/" 2>/dev/null
fi
echo "== peers, the rest ($(left) s left)"
peers 'quant_gemm|rmsnorm_gemm'
python3 bench/report.py --solder "$out/solder-reductions.jsonl" --peers "$out/peers-reductions.jsonl" --out-dir /tmp/pr \
  --suite reductions --no-plots > /dev/null 2>&1 && cp /tmp/pr/reductions.md "$out/" && cat "$out/reductions.md"
echo "== done ($(left) s left)"
