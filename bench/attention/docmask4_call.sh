#!/usr/bin/env bash
# One device call for document_mask with work tiles claimed from a counter and one-id boundary tiles
# (issue 17, branch docmask4, 2026-11-27): persistent data-mask blocks take Config::Dynamic (the producer
# claims, the classifier warps classify the claimed tile), and a boundary tile whose keys all carry one
# id compares each row's id once instead of per score (Mask::kOneIdTiles).
#   0. the attention skeleton's device test, data-mask cases only (`test_sm90_attention SEED dy`: the
#      Dynamic and one-id cases bit for bit against the static / per-score paths; `data` when this script
#      ran first, the Dynamic cases then in it), while every kernel of the call compiles (NVRTC, one per
#      core),
#   1. document_mask verified through `solder run --backend cuda` (float64 reference): small, paper,
#      S 4k, S 16k, D128,
#   2. `solder bench` of the suite's document_mask cells (S 1k / 4k / 16k), new and old
#      (SOLDER_ATTN_DYNAMIC=0 SOLDER_ATTN_ONE_ID=0: the merged docmask3 kernel) interleaved,
#   3. FlexAttention on the same cells (bench/peers.py: CUDA-graph replays, median), then a second round
#      of step 2, then at S 1k BN 64 (SOLDER_ATTN_DATA_BN=64, with and without the id table) beside new
#      twice, then the split of the two changes (SOLDER_ATTN_ONE_ID=0 alone) at S 4k / 16k, each under
#      DEADLINE,
#   4. with time left: ncu of the new kernel at S 4k,
#   5. summary.md (printed last).
#
#   bench/attention/docmask4_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Env: DEADLINE (seconds from the start after which no new step starts; default 105), VERIFY.
set -uo pipefail
out=${1:?usage: docmask4_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-105}
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
# the env of each mode (new: both paths of branch docmask4, the emitter's default when this script first
# ran, 2026-11-27 18:42 UTC; off by default since, after that call's hang)
mode_env() {
  case $1 in
    new) echo "SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_ONE_ID=1" ;;
    old) echo "SOLDER_ATTN_DYNAMIC=0 SOLDER_ATTN_ONE_ID=0" ;;
    dyn) echo "SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_ONE_ID=0" ;;
    bn64) echo "SOLDER_ATTN_DATA_BN=64 SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_ONE_ID=1" ;;
    bn64nt) echo "SOLDER_ATTN_DATA_BN=64 SOLDER_ATTN_ID_TABLE=0 SOLDER_ATTN_DYNAMIC=1 SOLDER_ATTN_ONE_ID=1" ;;
    *) echo "" ;;
  esac
}
{
  sed "s|^|$(mode_env new) $bin bench --compile-only |" "$out/runs.txt"
  while read -r id workload dims; do
    for mode in new old dyn; do echo "$(mode_env $mode) $bin bench --compile-only examples/$workload.sol $dims"; done
  done < "$out/bench-cases.txt"
  head -n 1 "$out/bench-cases.txt" | while read -r id workload dims; do
    for mode in bn64 bn64nt; do echo "$(mode_env $mode) $bin bench --compile-only examples/$workload.sol $dims"; done
  done
} | sed 's/^ *//' | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test, data-mask cases"
  timeout 50 "$test_bin" 2026 dy > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   Dy lines $(grep -c " Dy " "$out/device-test.txt"), per-score/table bit checks $(grep -c "bits$" "$out/device-test.txt"), the same $(grep -c "^OK .*the same bits" "$out/device-test.txt")"
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 60 ]; then echo "   deadline: not run: $args" | tee -a "$out/verify.tsv"; continue; fi
  t0=$(date +%s%N)
  env $(mode_env new) timeout 40 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

echo "== 2. solder bench: new and old interleaved, $(left) s left"
: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 id, $3 workload, rest dims
  local mode=$1 id=$2 workload=$3 line
  shift 3
  line=$(env $(mode_env "$mode") timeout 30 "$bin" bench "examples/$workload.sol" "$@" --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
bench_round() {  # $1: round, $2: seconds to keep
  while read -r id workload dims; do
    if [ "$(left)" -lt "$2" ]; then echo "   deadline: stopped before $id (round $1)"; break; fi
    bench_one new "$id" "$workload" $dims
    bench_one old "$id" "$workload" $dims
  done < "$out/bench-cases.txt"
}
bench_round 1 40

echo "== 3. FlexAttention, $(left) s left"
if [ "$(left)" -gt 25 ]; then
  timeout "$(( $(left) - 3 ))" python3 bench/peers.py --suite attention --cases '^document_mask-d64-s(1024|4096|16384)$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings > "$out/peers.log" 2>&1
  grep -v '^#' "$out/peers.log" | grep -E "document_mask|error|Error" | grep -v AUTOTUNE | cut -c1-160 | tail -n 6
fi
echo "== 2b. solder bench, round 2, then BN 64 at S 1k, then ONE_ID=0 alone, $(left) s left"
bench_round 2 15
for r in 1 2; do
  if [ "$(left)" -gt 8 ]; then
    head -n 1 "$out/bench-cases.txt" | while read -r id workload dims; do
      bench_one bn64 "$id" "$workload" $dims
      bench_one bn64nt "$id" "$workload" $dims
      bench_one new "$id" "$workload" $dims
    done
  fi
done
tail -n 2 "$out/bench-cases.txt" | while read -r id workload dims; do
  if [ "$(left)" -gt 6 ]; then bench_one dyn "$id" "$workload" $dims; fi
done

echo "== 4. ncu (new kernel, S 4k), $(left) s left"
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU_BIN" ] && [ "$(left)" -gt 12 ]; then
  timeout "$(left)" "$NCU_BIN" --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats -k regex:fused_o -c 1 \
    env $(mode_env new) "$bin" bench examples/document_mask.sol --dim B=4 --dim S=4096 > "$out/ncu-docmask-s4k.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Grid Size|Warp Cycles" "$out/ncu-docmask-s4k.txt" | head -16
fi

echo "== 5. summary ($(( $(date +%s) - start )) s)"
python3 - "$out" > "$out/summary.md" <<'PY'
import json, sys, os, statistics
out = sys.argv[1]
solder, flex = {}, {}
for line in open(os.path.join(out, "solder.jsonl")):
    r = json.loads(line)
    if r.get("result"): solder.setdefault((r["case"], r["mode"]), []).append(r["result"]["median_us"])
if os.path.exists(os.path.join(out, "peers.jsonl")):
    for line in open(os.path.join(out, "peers.jsonl")):
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("peer") == "flex": flex[r["case"]] = r["median_us"]
print("| cell | new (µs) | old: DYNAMIC=0 ONE_ID=0 (µs) | new / old | ONE_ID=0 alone (µs) | BN 64 / BN 64 no table (µs) | Flex kernel (µs) | new / Flex | target 0.83× Flex |")
print("|---|---|---|---|---|---|---|---|---|")
fmt = lambda x: "—" if not x else " / ".join(f"{v:.1f}" for v in x)
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    a, b, d, f = solder.get((c, "new")), solder.get((c, "old")), solder.get((c, "dyn")), flex.get(c)
    n, nt = solder.get((c, "bn64")), solder.get((c, "bn64nt"))
    am = a and statistics.median(a); bm = b and statistics.median(b)
    bn = "—" if not (n or nt) else f"{fmt(n)} / {fmt(nt)}"
    print(f"| {c} | {fmt(a)} | {fmt(b)} | {f'{am / bm:.3f}' if am and bm else '—'} | {fmt(d)} | {bn} | {f'{f:.1f}' if f else '—'} | {f'{am / f:.3f}' if am and f else '—'} | {f'{0.83 * f:.1f}' if f else '—'} |")
PY
cut -f1,2 "$out/verify.tsv" | tr '\t' ' ' | sed 's/^/   verify: /'
cat "$out/summary.md"
echo "== done in $(( $(date +%s) - start )) s"
