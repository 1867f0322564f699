#!/usr/bin/env bash
# One device call for diff_attn as one kernel (issue 17, branch diff-one, 2026-11-27, tenth session):
# the attention skeleton's dual mode, the two halves as the two consumer warpgroups of one block.
#   0. the dual mode's device test (tests/gpu/attention_skeleton/test_sm90_attention_dual.cu, a prebuilt
#      binary), while every kernel of the call compiles (NVRTC, one per core),
#   1. diff_attn verified through `solder run --backend cuda` (float64 reference) at paper sizes (hd64,
#      hd128), S 4k (hd64, hd128) and two smaller shapes that take the dual kernel,
#   2. `solder bench` of the suite's diff_attn cells (hd64, hd128 at S 1k / 4k / 16k), the dual kernel and
#      SOLDER_ATTN_DUAL=0 (the two-kernel plan) interleaved per cell,
#   3. FlexAttention on the same cells (bench/peers.py: CUDA-graph replays, median), hd64 first,
#      under DEADLINE,
#   4. summary.md (printed last).
#
#   bench/attention/diff_one_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Env: DEADLINE (seconds from the start after which no new step starts; default 145), VERIFY.
set -uo pipefail
out=${1:?usage: diff_one_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-145}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
v() { printf '%s|' "$@"; }
runs=${VERIFY:-$(v "examples/diff_attn.sol" "examples/diff_attn.sol --dim D=128" \
  "examples/diff_attn.sol --dim B=1 --dim S=4096" "examples/diff_attn.sol --dim B=1 --dim S=4096 --dim D=128" \
  "examples/diff_attn.sol --dim B=1 --dim H=2 --dim S=256" "examples/diff_attn.sol --dim B=2 --dim H=3 --dim S=512 --dim D=128")}
echo "${runs%|}" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
for d in (64, 128):
    for s in (1024, 4096, 16384):
        for c in suites.ALL_CASES:
            if c.suite == "attention" and c.id == f"diff_attn-d{d}-s{s}":
                print(c.id, c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
{
  sed "s|^|$bin bench --compile-only |" "$out/runs.txt"
  while read -r id workload dims; do
    echo "$bin bench --compile-only examples/$workload.sol $dims"
    echo "SOLDER_ATTN_DUAL=0 $bin bench --compile-only examples/$workload.sol $dims"
  done < "$out/bench-cases.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. dual-mode device test"
  timeout 60 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 60 ]; then echo "   deadline: not run: $args" | tee -a "$out/verify.tsv"; continue; fi
  t0=$(date +%s%N)
  timeout 40 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 2. solder bench: dual kernel and SOLDER_ATTN_DUAL=0, $(left) s left"
: > "$out/solder.jsonl"
while read -r id workload dims; do
  if [ "$(left)" -lt 40 ]; then echo "   deadline: stopped before $id"; break; fi
  for mode in dual two; do
    if [ "$mode" = two ]; then line=$(SOLDER_ATTN_DUAL=0 timeout 30 "$bin" bench "examples/$workload.sol" $dims --json 2>> "$out/solder.err" | tail -n 1)
    else line=$(timeout 30 "$bin" bench "examples/$workload.sol" $dims --json 2>> "$out/solder.err" | tail -n 1); fi
    echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
    echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us, %.0f TFLOP/s, %s kernels" % (r["median_us"], r.get("tflops", 0), r.get("kernels", "?")))
except Exception as e: print("failed", e)')"
  done
done < "$out/bench-cases.txt"

echo "== 3. FlexAttention, $(left) s left"
for cells in '^diff_attn-d64-s(1024|4096|16384)$' '^diff_attn-d128-s(1024|4096|16384)$'; do
  [ "$(left)" -lt 25 ] && break
  timeout "$(( $(left) + 5 ))" python3 bench/peers.py --suite attention --cases "$cells" --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings > "$out/peers-$(echo "$cells" | cut -c12-15).log" 2>&1
  grep -v '^#' "$out/peers-$(echo "$cells" | cut -c12-15).log" | grep -E "diff_attn|error|Error" | grep -v AUTOTUNE | cut -c1-160 | tail -n 6
done

echo "== 4. summary ($(( $(date +%s) - start )) s)"
python3 - "$out" > "$out/summary.md" <<'PY'
import json, sys, os
out = sys.argv[1]
solder, flex = {}, {}
for line in open(os.path.join(out, "solder.jsonl")):
    r = json.loads(line)
    if r.get("result"): solder[(r["case"], r["mode"])] = r["result"]
if os.path.exists(os.path.join(out, "peers.jsonl")):
    for line in open(os.path.join(out, "peers.jsonl")):
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("peer") == "flex": flex[r["case"]] = r["median_us"]
print("| cell | dual (µs) | kernels | two kernels, SOLDER_ATTN_DUAL=0 (µs) | dual / two | Flex (µs) | dual / Flex |")
print("|---|---|---|---|---|---|---|")
for d in (64, 128):
    for s in (1024, 4096, 16384):
        c = f"diff_attn-d{d}-s{s}"
        a, b, f = solder.get((c, "dual")), solder.get((c, "two")), flex.get(c)
        fmt = lambda x: f"{x:.1f}" if x else "—"
        au, bu = a and a["median_us"], b and b["median_us"]
        print(f"| {c} | {fmt(au)} | {a and a.get('kernels', '?') or '—'} | {fmt(bu)} | {f'{au / bu:.3f}' if au and bu else '—'} | {fmt(f)} | {f'{au / f:.3f}' if au and f else '—'} |")
PY
cat "$out/verify.tsv" | cut -f1,2 | tr '\t' ' ' | sed 's/^/   verify: /'
cat "$out/summary.md"
echo "== done in $(( $(date +%s) - start )) s"
