#!/usr/bin/env bash
# One device call for document_mask's fixed cost per work tile (issue 17, branch docmask7, 2026-11-28):
#   0. while every NVRTC kernel of the call compiles (one per core): the skeleton's device test, `SEED ids`
#      (the data-mask Configs on 3 and 7 blocks, the new ones first: PostedWork on a data mask, two Q
#      buffers, both at 64-key tiles; each bit for bit against the static persistent Config and within
#      the float64 reference),
#   1. clock stamps of the document_mask Configs (`bench_attention stamps_data`: the emitter's S 4k, S 4k
#      with PostedWork and with two Q buffers, S 1k, S 16k; stamped and plain outputs bit for bit), split
#      by bench/attention/stamps_table.py,
#   2. document_mask through `solder run --backend cuda` (float64 reference): small, paper and S 4k / 16k
#      with the default, paper (S 1k, 64-key tiles) and S 4k with SOLDER_ATTN_POSTED=1 SOLDER_ATTN_QBUFFERS=2,
#   3. `solder bench`, round 1: S 1k / 4k / 16k, modes old (the default), pw (SOLDER_ATTN_POSTED=1), q2
#      (SOLDER_ATTN_QBUFFERS=2), pwq2 (both),
#   4. FlexAttention max-autotune on the three cells (bench/peers.py, kernel time, CUDA-graph replays),
#   5. round 2 in the reverse mode order, then Flex's block-mask build (flex_docmask_build.py) with the
#      time left,
#   6. summary.md (printed last).
#
#   bench/attention/docmask7_call.sh OUTDIR SOLDER TEST BENCH_ATTENTION
#
# Env: DEADLINE (seconds from the start after which no optional step starts; default 128).
# Budget (one call, ≈ 136 s of command): test 16 s, stamps ≈ 10, verify ≈ 16, round 1 ≈ 25, Flex ≈ 45, then
# round 2 with what is left.
set -uo pipefail
out=${1:?usage: docmask7_call.sh OUTDIR SOLDER TEST BENCH_ATTENTION}
bin=${2:?} test_bin=${3:?} bench_bin=${4:?}
deadline=${DEADLINE:-128}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
mkdir -p "$out/stamps"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
cat COMMIT 2>/dev/null | tee -a "$out/device.txt"
ex=examples/document_mask.sol
printf '%s\n' "|$ex --small" "|$ex" "|$ex --dim B=4 --dim S=4096" "|$ex --dim B=1 --dim S=16384" \
  "SOLDER_ATTN_POSTED=1 SOLDER_ATTN_QBUFFERS=2|$ex" "SOLDER_ATTN_POSTED=1 SOLDER_ATTN_QBUFFERS=2|$ex --dim B=4 --dim S=4096" > "$out/runs.txt"
printf '%s\n' "document_mask-d64-s1024 --dim B=16 --dim S=1024 --dim D=64 --dim H=16" \
  "document_mask-d64-s4096 --dim B=4 --dim S=4096 --dim D=64 --dim H=16" \
  "document_mask-d64-s16384 --dim B=1 --dim S=16384 --dim D=64 --dim H=16" > "$out/cells.txt"
modes="old pw q2 pwq2"
mode_env() { case $1 in pw) echo "SOLDER_ATTN_POSTED=1" ;; q2) echo "SOLDER_ATTN_QBUFFERS=2" ;; pwq2) echo "SOLDER_ATTN_POSTED=1 SOLDER_ATTN_QBUFFERS=2" ;; *) echo "" ;; esac; }
{
  while IFS='|' read -r envs args; do echo "$envs $bin bench --compile-only $args"; done < "$out/runs.txt"
  while read -r id dims; do
    for mode in $modes; do echo "$(mode_env $mode) $bin bench --compile-only $ex $dims"; done
  done < "$out/cells.txt"
} | sed 's/^ *//' | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!

stamp "== 0. device test (ids: the data-mask Configs, the new ones first)"
OMP_NUM_THREADS=12 timeout 16 "$test_bin" 2026 ids > "$out/dt-ids.txt" 2>&1
stamp "   rc $?: $(grep -c '^OK' "$out/dt-ids.txt") OK, $(grep -c '^FAIL' "$out/dt-ids.txt") FAIL; Pw $(grep -c '^OK.*Pw data' "$out/dt-ids.txt") OK, Q2 $(grep -c '^OK.*Q2 Dy Ep data' "$out/dt-ids.txt") OK"
grep -E "^FAIL" "$out/dt-ids.txt" | head -6

stamp "== 1. clock stamps (bench_attention stamps_data)"
timeout 30 "$bench_bin" stamps_data "$out/stamps" > "$out/stamps.log" 2>&1
stamp "   rc $?"
grep -E "^stamps" "$out/stamps.log"
python3 bench/attention/stamps_table.py "$out"/stamps/stamps_*.bin --json "$out/stamps.json" > "$out/stamps.md" 2> "$out/stamps_table.err"
grep -E "^### |^fit|^classifier|^producer|^mean work" "$out/stamps.md"
wait "$compile_pid"
stamp "== compiled; errors: $(grep -ci error "$out/compile.log")"

stamp "== 2. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
while IFS='|' read -r envs args; do
  [ -z "$args" ] && continue
  t0=$(date +%s%N)
  env $envs timeout 20 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\t%s\trc %s\t%s ms\t%s\n' "${envs:-default}" "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

: > "$out/solder.jsonl"
bench_one() {  # $1 mode, $2 id, rest dims
  local mode=$1 id=$2 line
  shift 2
  line=$(env $(mode_env "$mode") timeout 20 "$bin" bench "$ex" "$@" --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id [$mode]: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
}
stamp "== 3. solder bench, round 1, $(left) s left"
while read -r id dims; do
  for mode in $modes; do
    if [ "$(left)" -lt 45 ]; then echo "   deadline: skipped $id [$mode]"; continue; fi
    bench_one $mode "$id" $dims
  done
done < "$out/cells.txt"

stamp "== 4. FlexAttention max-autotune, $(left) s left"
if [ "$(left)" -gt 30 ]; then
  timeout "$(( $(left) - 4 ))" python3 bench/peers.py --suite attention --cases '^document_mask-d64-s(1024|4096|16384)$' --peers flex \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 16 ))" --no-ceilings > "$out/peers.log" 2>&1
  grep -E "^document_mask" "$out/peers.log" | cut -c1-120
else
  echo "   deadline: Flex not run"
fi

stamp "== 5. solder bench, round 2 (modes reversed), $(left) s left"
while read -r id dims; do
  for mode in pwq2 q2 pw old; do
    if [ "$(left)" -lt 4 ]; then echo "   deadline: stopped before $id [$mode]"; break 2; fi
    bench_one $mode "$id" $dims
  done
done < "$out/cells.txt"
if [ "$(left)" -gt 12 ]; then
  timeout "$(( $(left) - 2 ))" python3 bench/attention/flex_docmask_build.py --reps 5 --out "$out/flex_build.jsonl" > "$out/flex_build.log" 2>&1
  tail -n 4 "$out/flex_build.log"
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
        if r.get("status") == "ok" and r.get("peer") == "flex": flex[r["case"]] = (r["median_us"], r.get("compile_mode", "?"))
modes = ["old", "pw", "q2", "pwq2"]
print("| cell | " + " | ".join(f"{m} (µs)" for m in modes) + " | best / old | Flex (µs, mode) | old / Flex | best / Flex | 0.83× Flex |")
print("|---|" + "---|" * (len(modes) + 5))
fmt = lambda x: "—" if not x else " / ".join(f"{v:.1f}" for v in x)
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    med = {m: statistics.median(solder[(c, m)]) for m in modes if solder.get((c, m))}
    old = med.get("old")
    best = min(med, key=med.get) if med else None
    f = flex.get(c)
    cells = [fmt(solder.get((c, m))) for m in modes]
    ratio = lambda a, b: f"{a / b:.3f}" if a and b else "—"
    print(f"| {c} | " + " | ".join(cells) + f" | {best}: {ratio(med.get(best), old) if best else '—'} | {f'{f[0]:.1f} ({f[1]})' if f else '—'} | {ratio(old, f and f[0])} | {ratio(med.get(best) if best else None, f and f[0])} | {f'{0.83 * f[0]:.1f}' if f else '—'} |")
PY
cut -f1-3 "$out/verify.tsv" | tr '\t' ' ' | sed 's/^/   verify: /'
grep -E "^### |^fit|^classifier" "$out/stamps.md"
cat "$out/summary.md"
stamp "== done"
