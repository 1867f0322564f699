#!/usr/bin/env bash
# One device call for document_mask's multi-id boundary tiles selected straight from the compare, and
# the staged epilogue / 64-key tiles as A/B knobs (issue 17, branch docmask6, 2026-11-28):
#   0. while every NVRTC kernel of the call compiles (one per core): the attention skeleton's device test
#      of the new header and of the old one (same test source, `SEED ids`: the data masks' boundary tiles
#      of two and many key ids on every data-mask Config, Dynamic on 3 and 7 blocks included), each line
#      with the FNV hash of the output bits: the two runs must print the same hashes (bit for bit against
#      the old path), and every case passes the float64 reference,
#   1. document_mask verified through `solder run --backend cuda` (float64 reference): small, paper,
#      S 4k, S 16k, D128,
#   2. `solder bench` of the suite's cells: new and old at S 1k / 4k / 16k interleaved, then new with
#      SOLDER_ATTN_EPI=1 (the staged epilogue) at all three and SOLDER_ATTN_DATA_BN=64 at S 4k,
#   3. a second round of new and old,
#   4. FlexAttention in torch.compile's default mode on the three cells (bench/peers.py, CUDA-graph
#      replays, median; max-autotune compiles for minutes: its times are the twelfth session's call 3),
#   5. with the time left, a sample of the other data-mask cases (`SEED data`, new header),
#   6. summary.md (printed last).
#
#   bench/attention/docmask6_call.sh OUTDIR NEW_SOLDER OLD_SOLDER NEW_TEST OLD_TEST
#
# Env: DEADLINE (seconds from the start after which no optional step starts; default 100).
set -uo pipefail
out=${1:?usage: docmask6_call.sh OUTDIR NEW_SOLDER OLD_SOLDER NEW_TEST OLD_TEST}
new_bin=${2:?} old_bin=${3:?} new_test=${4:?} old_test=${5:?}
deadline=${DEADLINE:-100}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
cat COMMIT 2>/dev/null | tee -a "$out/device.txt"
runs="examples/document_mask.sol --small|examples/document_mask.sol|examples/document_mask.sol --dim B=4 --dim S=4096|examples/document_mask.sol --dim B=1 --dim S=16384|examples/document_mask.sol --dim D=128 --dim B=2"
echo "$runs" | tr '|' '\n' > "$out/runs.txt"
# the suite's three cells: id, dims
printf '%s\n' "document_mask-d64-s1024 --dim B=16 --dim S=1024 --dim D=64 --dim H=16" \
  "document_mask-d64-s4096 --dim B=4 --dim S=4096 --dim D=64 --dim H=16" \
  "document_mask-d64-s16384 --dim B=1 --dim S=16384 --dim D=64 --dim H=16" > "$out/cells.txt"
mode_bin() { case $1 in old) echo "$old_bin" ;; *) echo "$new_bin" ;; esac; }
mode_env() { case $1 in epi) echo "SOLDER_ATTN_EPI=1" ;; bn64) echo "SOLDER_ATTN_DATA_BN=64" ;; *) echo "" ;; esac; }
round1_modes() { case $1 in *-s4096) echo "new old epi bn64" ;; *) echo "new old epi" ;; esac; }
{
  sed "s|^|$new_bin bench --compile-only |" "$out/runs.txt"
  while read -r id dims; do
    for mode in $(round1_modes "$id"); do echo "$(mode_env $mode) $(mode_bin $mode) bench --compile-only examples/document_mask.sol $dims"; done
  done < "$out/cells.txt"
} | sed 's/^ *//' | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!

stamp "== 0. device test: boundary tiles of two and many key ids (ids), new and old header"
# (both at once, 8 OpenMP threads each for the float64 references)
OMP_NUM_THREADS=8 timeout 24 "$new_test" 2026 ids > "$out/dt-ids-new.txt" 2>&1 &
new_pid=$!
OMP_NUM_THREADS=8 timeout 24 "$old_test" 2026 ids > "$out/dt-ids-old.txt" 2>&1 &
old_pid=$!
wait "$new_pid"; rc_new=$?; wait "$old_pid"; rc_old=$?
stamp "   new rc $rc_new: $(tail -n 1 "$out/dt-ids-new.txt")"
stamp "   old rc $rc_old: $(tail -n 1 "$out/dt-ids-old.txt")"
grep -E "^FAIL" "$out/dt-ids-new.txt" | head -6
# the hash of every case line, new against old (lines "OK ... bits HASH"; the bit-check lines carry none)
paste -d' ' <(grep -o "bits [0-9a-f]*$" "$out/dt-ids-new.txt") <(grep -o "bits [0-9a-f]*$" "$out/dt-ids-old.txt") > "$out/ids-hashes.txt"
echo "   hash lines: new $(grep -c 'bits [0-9a-f]*$' "$out/dt-ids-new.txt"), old $(grep -c 'bits [0-9a-f]*$' "$out/dt-ids-old.txt"), the same $(awk '$2 == $4' "$out/ids-hashes.txt" | wc -l), different $(awk '$2 != $4' "$out/ids-hashes.txt" | wc -l)" | tee "$out/ids-compare.txt"
wait "$compile_pid"
stamp "== compiled; errors: $(grep -ci error "$out/compile.log")"

stamp "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  t0=$(date +%s%N)
  timeout 20 "$new_bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

stamp "== 2. solder bench, round 1, $(left) s left"
: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 id, rest dims
  local mode=$1 id=$2 line
  shift 2
  line=$(env $(mode_env "$mode") timeout 20 "$(mode_bin "$mode")" bench examples/document_mask.sol "$@" --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
while read -r id dims; do
  for mode in new old; do bench_one $mode "$id" $dims; done
done < "$out/cells.txt"
while read -r id dims; do
  for mode in $(round1_modes "$id"); do
    case $mode in new | old) continue ;; esac
    if [ "$(left)" -lt 35 ]; then echo "   deadline: skipped $id [$mode]"; continue; fi
    bench_one $mode "$id" $dims
  done
done < "$out/cells.txt"

stamp "== 3. solder bench, round 2 (new, old), $(left) s left"
while read -r id dims; do
  for mode in new old; do
    if [ "$(left)" -lt 8 ]; then echo "   deadline: stopped before $id [$mode]"; break 2; fi
    bench_one $mode "$id" $dims
  done
done < "$out/cells.txt"

stamp "== 4. FlexAttention (default mode), $(left) s left"
if [ "$(left)" -gt 20 ]; then
  timeout "$(( $(left) - 4 ))" python3 bench/peers.py --suite attention --cases '^document_mask-d64-s(1024|4096|16384)$' --peers flex \
    --compile-mode default --out "$out/peers.jsonl" --time-limit "$(( $(left) - 14 ))" --no-ceilings > "$out/peers.log" 2>&1
  grep -E "^document_mask" "$out/peers.log" | cut -c1-120
else
  echo "   deadline: Flex not run"
fi

stamp "== 5. a sample of the other data-mask cases (new header), $(left) s left"
if [ "$(left)" -gt 6 ]; then
  timeout "$(( $(left) - 2 ))" "$new_test" 2026 data > "$out/dt-data-sample.txt" 2>&1
  stamp "   data sample: $(grep -c '^OK' "$out/dt-data-sample.txt") OK, $(grep -c '^FAIL' "$out/dt-data-sample.txt") FAIL"
fi

stamp "== 6. summary"
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
# FlexAttention max-autotune, the twelfth session's call 3 (integrator-2026-11-27-s12/call3)
flex_at = {"document_mask-d64-s1024": 105.24, "document_mask-d64-s4096": 154.89, "document_mask-d64-s16384": 347.41}
print("| cell | new (µs) | old (µs) | new / old | new + staged epilogue (µs) | new, 64-key tiles (µs) | Flex default, this call (µs) | Flex max-autotune, s12 call 3 (µs) | new / Flex-at | target 0.83× Flex-at |")
print("|---|---|---|---|---|---|---|---|---|---|")
fmt = lambda x: "—" if not x else " / ".join(f"{v:.1f}" for v in x)
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    a, b = solder.get((c, "new")), solder.get((c, "old"))
    am = a and statistics.median(a); bm = b and statistics.median(b)
    f, fa = flex.get(c), flex_at[c]
    print(f"| {c} | {fmt(a)} | {fmt(b)} | {f'{am / bm:.3f}' if am and bm else '—'} | {fmt(solder.get((c, 'epi')))} | {fmt(solder.get((c, 'bn64')))} | {f'{f:.1f}' if f else '—'} | {fa:.1f} | {f'{am / fa:.3f}' if am else '—'} | {0.83 * fa:.1f} |")
PY
cat "$out/ids-compare.txt"
cut -f1,2 "$out/verify.tsv" | tr '\t' ' ' | sed 's/^/   verify: /'
cat "$out/summary.md"
stamp "== done"
