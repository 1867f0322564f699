#!/usr/bin/env bash
# One device call for document_mask with the key tiles' id table (issue 17, branch docmask3,
# 2026-11-27): persistent data-mask blocks reduce the key tiles' id ranges once per block and classify a
# work tile from its rows' ids alone (Mask::kColGroups), at every S.
#   0. the attention skeleton's device test (a prebuilt binary; the id-table cases bit for bit against
#      the per-tile classification on the same inputs), while every kernel of the call compiles (NVRTC,
#      one per core),
#   1. document_mask verified through `solder run --backend cuda` (float64 reference): small, paper,
#      S 4k, S 16k, D128,
#   2. `solder bench` of the suite's document_mask cells (S 1k / 4k / 16k), new (the id table) and old
#      (SOLDER_ATTN_ID_TABLE=0: the previous kernel) interleaved,
#   3. FlexAttention on the same cells (bench/peers.py: CUDA-graph replays, median), then a second round
#      of step 2, S 1k with SOLDER_ATTN_DATA_BN=64 (64-key tiles), and Flex's block-mask build alone
#      (flex_docmask_build.py), each under DEADLINE,
#   4. with time left and a missed cell: ncu of the new kernel at S 16k,
#   5. summary.md (printed last).
#
#   bench/attention/docmask3_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Env: DEADLINE (seconds from the start after which no new step starts; default 140), VERIFY.
set -uo pipefail
out=${1:?usage: docmask3_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-140}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
runs=${VERIFY:-"examples/document_mask.sol --small|examples/document_mask.sol|examples/document_mask.sol --dim B=4 --dim S=4096|examples/document_mask.sol --dim B=1 --dim S=16384|examples/document_mask.sol --dim D=128 --dim B=2"}
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
for s in (1024, 4096, 16384):
    for c in suites.ALL_CASES:
        if c.suite == "attention" and c.id == f"document_mask-d64-s{s}":
            print(c.id, c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
{
  sed "s|^|$bin bench --compile-only |" "$out/runs.txt"
  while read -r id workload dims; do
    echo "$bin bench --compile-only examples/$workload.sol $dims"
    echo "SOLDER_ATTN_ID_TABLE=0 $bin bench --compile-only examples/$workload.sol $dims"
  done < "$out/bench-cases.txt"
  head -n 1 "$out/bench-cases.txt" | while read -r id workload dims; do
    echo "SOLDER_ATTN_DATA_BN=64 $bin bench --compile-only examples/$workload.sol $dims"
  done
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 60 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   id-table cases: $(grep -c "table" "$out/device-test.txt") lines, $(grep -c "^OK .*the same bits" "$out/device-test.txt") bit-identical"
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 80 ]; then echo "   deadline: not run: $args" | tee -a "$out/verify.tsv"; continue; fi
  t0=$(date +%s%N)
  timeout 40 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 2. solder bench: new (id table) and old (SOLDER_ATTN_ID_TABLE=0) interleaved, $(left) s left"
: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 id, $3 workload, rest dims
  local mode=$1 id=$2 workload=$3 line
  shift 3
  case $mode in
    old) line=$(SOLDER_ATTN_ID_TABLE=0 timeout 30 "$bin" bench "examples/$workload.sol" "$@" --json 2>> "$out/solder.err" | tail -n 1) ;;
    bn64) line=$(SOLDER_ATTN_DATA_BN=64 timeout 30 "$bin" bench "examples/$workload.sol" "$@" --json 2>> "$out/solder.err" | tail -n 1) ;;
    *) line=$(timeout 30 "$bin" bench "examples/$workload.sol" "$@" --json 2>> "$out/solder.err" | tail -n 1) ;;
  esac
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
bench_round() {  # $1: round
  while read -r id workload dims; do
    if [ "$(left)" -lt "$2" ]; then echo "   deadline: stopped before $id (round $1)"; break; fi
    bench_one new "$id" "$workload" $dims
    bench_one old "$id" "$workload" $dims
  done < "$out/bench-cases.txt"
}
bench_round 1 50

echo "== 3. FlexAttention, $(left) s left"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 5 ))" python3 bench/peers.py --suite attention --cases '^document_mask-d64-s(1024|4096|16384)$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 25 ))" --no-ceilings > "$out/peers.log" 2>&1
  grep -v '^#' "$out/peers.log" | grep -E "document_mask|error|Error" | grep -v AUTOTUNE | cut -c1-160 | tail -n 6
fi
echo "== 2b. solder bench, round 2, then BN 64 at S 1k, $(left) s left"
bench_round 2 25
if [ "$(left)" -gt 15 ]; then
  head -n 1 "$out/bench-cases.txt" | while read -r id workload dims; do bench_one bn64 "$id" "$workload" $dims; done
fi
if [ "$(left)" -gt 15 ]; then
  timeout "$(( $(left) - 3 ))" python3 bench/attention/flex_docmask_build.py --out "$out/flex-build.jsonl" > "$out/flex-build.log" 2>&1
  tail -n 4 "$out/flex-build.log"
fi

echo "== 4. ncu (new kernel, S 16k), $(left) s left"
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU_BIN" ] && [ "$(left)" -gt 12 ]; then
  timeout "$(left)" "$NCU_BIN" --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats -k regex:fused_o -c 1 \
    "$bin" bench examples/document_mask.sol --dim B=1 --dim S=16384 > "$out/ncu-docmask-s16k.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Grid Size|Warp Cycles" "$out/ncu-docmask-s16k.txt" | head -16
fi

echo "== 5. summary ($(( $(date +%s) - start )) s)"
python3 - "$out" > "$out/summary.md" <<'PY'
import json, sys, os, statistics
out = sys.argv[1]
solder, flex, build = {}, {}, {}
for line in open(os.path.join(out, "solder.jsonl")):
    r = json.loads(line)
    if r.get("result"): solder.setdefault((r["case"], r["mode"]), []).append(r["result"]["median_us"])
if os.path.exists(os.path.join(out, "peers.jsonl")):
    for line in open(os.path.join(out, "peers.jsonl")):
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("peer") == "flex": flex[r["case"]] = r["median_us"]
print("| cell | new, id table (µs) | old, SOLDER_ATTN_ID_TABLE=0 (µs) | new / old | BN 64 (µs) | Flex kernel (µs) | new / Flex | target 0.83× Flex |")
print("|---|---|---|---|---|---|---|---|")
fmt = lambda x: "—" if not x else " / ".join(f"{v:.1f}" for v in x)
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    a, b, n, f = solder.get((c, "new")), solder.get((c, "old")), solder.get((c, "bn64")), flex.get(c)
    am = a and statistics.median(a); bm = b and statistics.median(b)
    print(f"| {c} | {fmt(a)} | {fmt(b)} | {f'{am / bm:.3f}' if am and bm else '—'} | {fmt(n)} | {f'{f:.1f}' if f else '—'} | {f'{am / f:.3f}' if am and f else '—'} | {f'{0.83 * f:.1f}' if f else '—'} |")
PY
cut -f1,2 "$out/verify.tsv" | tr '\t' ' ' | sed 's/^/   verify: /'
cat "$out/summary.md"
echo "== done in $(( $(date +%s) - start )) s"
