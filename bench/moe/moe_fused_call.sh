#!/usr/bin/env bash
# One device call for moe_routing as one kernel (issue 17 part 1 / issue 15, branch moe-fused): the
# logits GEMM with softmax and top-k in the GEMM skeleton's epilogue (fusion/row_epilogue.h).
#   0. the row-reduction epilogue's device test (a prebuilt tests/gpu/gemm/test_sm90_gemm_rows),
#   1. moe_routing verified through `solder run --backend cuda` (float64 reference): small, default,
#      R1–R8 and ragged shapes (T 300, E 120),
#   2. `solder bench` of R1–R8, one kernel (SOLDER_ROW_EPILOGUE=1) then two kernels (=0),
#   3. the peers in the same call: torch eager, then torch.compile (default mode) as time allows,
#   4. one kernel on the other split-K choice (SOLDER_GEMM_TILE: the tile's share of the difference).
# Every NVRTC kernel is compiled first, in parallel, while the device test runs. A deadline guard
# (DEADLINE seconds from the start, default 140) skips what is left rather than time out.
# The call of 2026-11-27 (results/h100/moe-fused-raw/) ran this script at 016b110, when one kernel was
# the default and the modes set only SOLDER_ROW_EPILOGUE=0; both are explicit now (the default is two).
#
#   bench/moe/moe_fused_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
set -uo pipefail
out=${1:?usage: moe_fused_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-140}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ >> "$out/device.txt"
cat "$out/device.txt"
python3 - > "$out/cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.workload == "moe_routing":
        print(c.id, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
{
  echo "examples/moe_routing.sol --small"
  echo "examples/moe_routing.sol"
  echo "examples/moe_routing.sol --dim T=300 --dim E=120 --dim HID=1024 --dim K=8"
  echo "examples/moe_routing.sol --dim T=300 --dim E=64 --dim HID=512 --dim K=1"
  while read -r id dims; do echo "examples/moe_routing.sol $dims"; done < "$out/cases.txt"
} > "$out/runs.txt"
# The other split of each case's tile (the A/B of step 4): split-K 4 where the model chose none, none
# where it chose 4 (E 128: BN 128; E 64: BN 64).
alt_tile() {
  case "$1" in
    *-R1|*-R2|*-R7) echo 64x128s9k4 ;;
    *-R3|*-R8) echo 64x128s9k1 ;;
    *-R4|*-R5) echo 64x64s14k1 ;;
    *) echo 64x64s11k4 ;;
  esac
}
{
  while read -r id dims; do echo "SOLDER_ROW_EPILOGUE=1 SOLDER_GEMM_TILE=$(alt_tile "$id") $bin bench --compile-only examples/moe_routing.sol $dims"; done < "$out/cases.txt"
  sed "s|^|SOLDER_ROW_EPILOGUE=1 $bin bench --compile-only |" "$out/runs.txt"
  while read -r id dims; do echo "SOLDER_ROW_EPILOGUE=0 $bin bench --compile-only examples/moe_routing.sol $dims"; done < "$out/cases.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. row-reduction epilogue device test"
  timeout 40 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"
echo "== 1. verified through the CUDA backend (float64 reference), 6 at a time"
mkdir -p "$out/verify"
nl -ba "$out/runs.txt" | xargs -d '\n' -P 6 -n 1 sh -c 'set -- $0; n=$1; shift
  SOLDER_ROW_EPILOGUE=1 timeout 25 '"$bin"' run --backend cuda "$@" > '"$out"'/verify/$n.log 2>&1; echo "$? $*" > '"$out"'/verify/$n.rc'
: > "$out/verify.tsv"
for f in "$out"/verify/*.rc; do
  n=$(basename "$f" .rc)
  printf '%s\t%s\n' "$(cat "$f")" "$(grep -v '^$' "$out/verify/$n.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
done
echo "   passed: $(grep -c '^0 ' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"
echo "== 2. solder bench R1–R8: one kernel (SOLDER_ROW_EPILOGUE=1), then two kernels (=0), $(left) s left"
: > "$out/solder.jsonl"
for mode in one two; do
  while read -r id dims; do
    if [ "$(left)" -lt 45 ]; then echo "   deadline: stopped before $mode $id"; break; fi
    if [ "$mode" = two ]; then line=$(SOLDER_ROW_EPILOGUE=0 timeout 20 "$bin" bench examples/moe_routing.sol $dims --json 2>>"$out/solder.err" | tail -n 1)
    else line=$(SOLDER_ROW_EPILOGUE=1 timeout 20 "$bin" bench examples/moe_routing.sol $dims --json 2>>"$out/solder.err" | tail -n 1); fi
    echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
    echo "   [$mode] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.2f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
  done < "$out/cases.txt"
done
echo "== 3. peers: eager, then torch.compile (default mode), $(left) s left"
if [ "$(left)" -gt 15 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite reductions --cases '^moe_routing-' --peers eager --out "$out/peers.jsonl" \
    --no-ceilings --time-limit "$(( $(left) - 10 ))" > "$out/peers-eager.log" 2>&1
  tail -n 3 "$out/peers-eager.log"
fi
if [ "$(left)" -gt 20 ]; then
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite reductions --cases '^moe_routing-' --peers compile --compile-mode default \
    --out "$out/peers.jsonl" --no-ceilings --time-limit "$(( $(left) - 15 ))" > "$out/peers-compile.log" 2>&1
  tail -n 3 "$out/peers-compile.log"
fi
echo "== 4. one kernel on the other split (SOLDER_GEMM_TILE), $(left) s left"
while read -r id dims; do
  alt=$(alt_tile "$id")
  if [ "$(left)" -lt 3 ]; then echo "   deadline: stopped before alt $id"; break; fi
  line=$(SOLDER_ROW_EPILOGUE=1 SOLDER_GEMM_TILE=$alt timeout 20 "$bin" bench examples/moe_routing.sol $dims --json 2>>"$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"alt $alt\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [$alt] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.2f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
done < "$out/cases.txt"
echo "== summary"
python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, sys, os
out = sys.argv[1]
solder, peers = {}, {}
for line in open(os.path.join(out, "solder.jsonl")):
    r = json.loads(line)
    if r.get("result"): solder[(r["case"], r["mode"])] = r["result"]["median_us"]
if os.path.exists(os.path.join(out, "peers.jsonl")):
    for line in open(os.path.join(out, "peers.jsonl")):
        r = json.loads(line)
        if r.get("record") != "peer": continue
        if r.get("status") == "ok" and r.get("verified", True):
            peers[(r.get("case"), r.get("peer"))] = r.get("median_us")
cases = sorted({c for c, _ in solder}, key=lambda c: int(c.split("-R")[1]))
print("| case | one kernel µs | two kernels µs | one / two | other split µs | eager µs | compile µs | one / best peer |")
print("|---|---|---|---|---|---|---|---|")
for c in cases:
    one, two = solder.get((c, "one")), solder.get((c, "two"))
    e, k = peers.get((c, "eager")), peers.get((c, "compile"))
    best = min([v for v in (e, k) if v] or [None]) if (e or k) else None
    f = lambda v: "—" if v is None else "%.2f" % v
    alt = next((v for (cc, m), v in solder.items() if cc == c and m.startswith("alt")), None)
    print(f"| {c} | {f(one)} | {f(two)} | {f(one / two if one and two else None)} | {f(alt)} | {f(e)} | {f(k)} | {f(one / best if one and best else None)} |")
PY
echo "== done in $(( $(date +%s) - start )) s"
