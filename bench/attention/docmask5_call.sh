#!/usr/bin/env bash
# One device call for document_mask on 64-key tiles at S <= 1k and the id table built per key-id group
# as a block's work tiles first need it (issue 17, branch docmask5, 2026-11-27):
#   0. the attention skeleton's device test, the id-table cases only (`test_sm90_attention SEED table`:
#      Dynamic on 3 and 7 blocks, then the static persistent configurations, each bit for bit against
#      the per-tile classification and the per-score compare on the same inputs, and the float64 host
#      reference), while every kernel of the call compiles (NVRTC, one per core),
#   1. document_mask verified through `solder run --backend cuda` (float64 reference): small, paper,
#      S 4k, S 16k, D128,
#   2. `solder bench` of the suite's document_mask cells (S 1k / 4k / 16k), new and old (OLD_BIN: the
#      binary of the branch's base, the merged default) interleaved; at S 1k also old on 64-key tiles
#      (SOLDER_ATTN_DATA_BN=64: the table built whole before the first tile) and new without the table
#      (SOLDER_ATTN_ID_TABLE=0),
#   3. FlexAttention on the same cells (bench/peers.py: CUDA-graph replays, median), then a second round
#      of step 2, each under DEADLINE,
#   4. with time left: ncu of the new kernel at S 1k,
#   5. summary.md (printed last).
#
#   bench/attention/docmask5_call.sh OUTDIR NEW_SOLDER OLD_SOLDER [DEVICE_TEST_BINARY]
#
# Env: DEADLINE (seconds from the start after which no new step starts; default 135), VERIFY.
set -uo pipefail
out=${1:?usage: docmask5_call.sh OUTDIR NEW_SOLDER OLD_SOLDER [DEVICE_TEST]}
new_bin=${2:?new solder binary}
old_bin=${3:?old solder binary}
test_bin=${4:-}
deadline=${DEADLINE:-135}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
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
# the binary and env of each mode
mode_bin() { case $1 in old | oldbn64) echo "$old_bin" ;; *) echo "$new_bin" ;; esac; }
mode_env() {
  case $1 in
    oldbn64) echo "SOLDER_ATTN_DATA_BN=64" ;;
    nt) echo "SOLDER_ATTN_ID_TABLE=0" ;;
    *) echo "" ;;
  esac
}
modes_of() {  # the modes measured at cell $1
  case $1 in *-s1024) echo "new old oldbn64 nt" ;; *) echo "new old" ;; esac
}
{
  sed "s|^|$new_bin bench --compile-only |" "$out/runs.txt"
  while read -r id workload dims; do
    for mode in $(modes_of "$id"); do echo "$(mode_env $mode) $(mode_bin $mode) bench --compile-only examples/$workload.sol $dims"; done
  done < "$out/bench-cases.txt"
} | sed 's/^ *//' | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  stamp "== 0. attention skeleton device test, id-table cases"
  timeout 45 "$test_bin" 2026 table > "$out/device-test.txt" 2>&1
  stamp "   rc $?: $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -8
  echo "   Dy lines $(grep -c " Dy " "$out/device-test.txt"), table lines $(grep -c " table" "$out/device-test.txt"), bit checks $(grep -c "bits$" "$out/device-test.txt"), the same $(grep -c "^OK .*the same bits" "$out/device-test.txt")"
fi
wait "$compile_pid"
stamp "== compiled; errors: $(grep -ci error "$out/compile.log")"

stamp "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 75 ]; then echo "   deadline: not run: $args" | tee -a "$out/verify.tsv"; continue; fi
  t0=$(date +%s%N)
  timeout 25 "$new_bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

stamp "== 2. solder bench: new and old interleaved, $(left) s left"
: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 id, $3 workload, rest dims
  local mode=$1 id=$2 workload=$3 line
  shift 3
  line=$(env $(mode_env "$mode") timeout 25 "$(mode_bin "$mode")" bench "examples/$workload.sol" "$@" --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
bench_round() {  # $1: round, $2: seconds to keep
  while read -r id workload dims; do
    for mode in $(modes_of "$id"); do
      if [ "$(left)" -lt "$2" ]; then echo "   deadline: stopped before $id [$mode] (round $1)"; return; fi
      bench_one "$mode" "$id" "$workload" $dims
    done
  done < "$out/bench-cases.txt"
}
bench_round 1 40

stamp "== 3. FlexAttention, $(left) s left"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 5 ))" python3 bench/peers.py --suite attention --cases '^document_mask-d64-s(1024|4096|16384)$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 20 ))" --no-ceilings > "$out/peers.log" 2>&1
  grep -v '^#' "$out/peers.log" | grep -E "document_mask|error|Error" | grep -v AUTOTUNE | cut -c1-160 | tail -n 6
fi
stamp "== 2b. solder bench, round 2, $(left) s left"
bench_round 2 6

stamp "== 4. ncu (new kernel, S 1k), $(left) s left"
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU_BIN" ] && [ "$(left)" -gt 12 ]; then
  timeout "$(left)" "$NCU_BIN" --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats -k regex:fused_o -c 1 \
    "$new_bin" bench examples/document_mask.sol > "$out/ncu-docmask-s1k.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Grid Size|Warp Cycles" "$out/ncu-docmask-s1k.txt" | head -16
fi

stamp "== 5. summary"
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
print("| cell | new (µs) | old: base binary (µs) | new / old | old BN 64, table up front (µs) | new, no table (µs) | Flex kernel (µs) | new / Flex | target 0.83× Flex |")
print("|---|---|---|---|---|---|---|---|---|")
fmt = lambda x: "—" if not x else " / ".join(f"{v:.1f}" for v in x)
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    a, b, f = solder.get((c, "new")), solder.get((c, "old")), flex.get(c)
    am = a and statistics.median(a); bm = b and statistics.median(b)
    print(f"| {c} | {fmt(a)} | {fmt(b)} | {f'{am / bm:.3f}' if am and bm else '—'} | {fmt(solder.get((c, 'oldbn64')))} | {fmt(solder.get((c, 'nt')))} | {f'{f:.1f}' if f else '—'} | {f'{am / f:.3f}' if am and f else '—'} | {f'{0.83 * f:.1f}' if f else '—'} |")
PY
cut -f1,2 "$out/verify.tsv" | tr '\t' ' ' | sed 's/^/   verify: /'
cat "$out/summary.md"
stamp "== done"
