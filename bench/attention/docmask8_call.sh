#!/usr/bin/env bash
# docmask8's device call (issue 17, 2026-11-28): document_mask with the consumers' row ids from the list
# buffer (Config::SharedRowIds, SOLDER_ATTN_ROW_IDS=shared) and the boundary tiles' key ids loaded one tile
# ahead (Config::KeyIdsAhead, SOLDER_ATTN_KEY_IDS=ahead). A short wrapper around bench/merged_call.sh for
# the steps it lacks, run from the root staged by bench/merged_stage.sh (plus bin/bench_attention):
#   cd .devcarry/docmask8 && bash bench/attention/docmask8_call.sh
#   0. every NVRTC kernel of the call compiles in the background (one per core: the spots' cells in both
#      modes, document_mask --small and paper size with both knobs), while
#   1. the clock stamps run (`bench_attention stamps_data DIR ids`: S 4k's default, with each knob and with
#      both, both at S 16k; stamped and plain outputs bit for bit), split by stamps_table.py;
#   2. `solder run --backend cuda` of document_mask --small and paper size with both knobs;
#   3. bench/merged_call.sh with both knobs exported: the device test's new cases (filter "Id-") and a
#      short `ids` sample, VERIFY of the three suite cells, the spots of bench/attention/docmask8.spots
#      (old / new in two alternating rounds), FlexAttention max-autotune;
#   4. the summary (old vs new per round, against Flex), printed last.
# Env: TOTAL (seconds for the whole command; default 124): merged_call's DEADLINE is what is left of it.
# Files: everything under a work folder W (merged_call's OUT), the key ones copied to $OUT as they finish
# (at most 8 come back): stamps.md, dt-new.txt, verify-small.txt, docmask8.md, r.tgz (all of W/r at the end).
set -uo pipefail
F=${OUT:-/tmp/out}; O=${W:-/tmp/docmask8-w}; rm -rf $O; mkdir -p $O/r/stamps $F
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); total=${TOTAL:-124}
left() { echo $(( total - ($(date +%s) - start) )); }
say() { echo "[$(( $(date +%s) - start )) s] $*"; }
ex=examples/document_mask.sol
cells='^document_mask-d64-s(1024|4096|16384)$'
new="SOLDER_ATTN_ROW_IDS=shared SOLDER_ATTN_KEY_IDS=ahead"
{
  for knobs in "SOLDER_ATTN_ROW_IDS=shared SOLDER_ATTN_KEY_IDS=ahead" "SOLDER_ATTN_ROW_IDS=global SOLDER_ATTN_KEY_IDS=late"; do
    python3 bench/suites.py --suite attention --cases "$cells" --solder-commands --compile-only --timeout 120 \
      --out /dev/null 2>/dev/null | sed "s|^|$knobs |"
  done
  echo "$new build/solder bench --compile-only $ex --small"
  echo "$new build/solder bench --compile-only $ex"
} > $O/r/precompile.txt
xargs -d '\n' -P "$(nproc)" -n 1 sh -c < $O/r/precompile.txt > $O/r/precompile.log 2>&1 &
compile_pid=$!

say "== 1. stamps (bench_attention stamps_data ids)"
timeout 25 bin/bench_attention stamps_data $O/r/stamps ids > $O/r/stamps.log 2>&1
say "   rc $?"; grep -E "^stamps" $O/r/stamps.log
python3 bench/attention/stamps_table.py $O/r/stamps/stamps_*.bin --json $O/r/stamps.json > $O/r/stamps.md 2> $O/r/stamps_table.err
grep -E "^### |^mean work|^fit" $O/r/stamps.md
grep -E "^\| (take→Q|softmax0|last softmax\+V|epilogue) " $O/r/stamps.md
cp $O/r/stamps.md $O/r/stamps.log $F/ 2>/dev/null
wait $compile_pid
say "== 0. compiled: $(grep -c compiled $O/r/precompile.log) of $(wc -l < $O/r/precompile.txt)"

say "== 2. solder run --backend cuda, $new"
for args in "$ex --small" "$ex"; do
  env $new timeout 20 build/solder run --backend cuda $args > $O/r/verify-small.log 2>&1
  echo "   $args: rc $? $(grep -v '^$' $O/r/verify-small.log | tail -n 1 | cut -c1-120)"
done | tee $O/r/verify-small.txt
cp $O/r/verify-small.txt $F/

say "== 3. merged_call.sh ($(left) s left)"
env $new DEVICE_TESTS="attention:20:Id- attention:4:ids" RUN_SH=0 VERIFY="$cells" \
  SPOTS=bench/attention/docmask8.spots DEADLINE=$(left) OUT=$O bash bench/merged_call.sh
cp $O/r/dt-attention-Id-.txt $F/dt-new.txt 2>/dev/null

say "== 4. summary"
python3 - $O/r > $O/r/docmask8.md <<'PY'
import json, os, sys
d = sys.argv[1]
def rows(name):
    p = os.path.join(d, name)
    return [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
flex = {r["case"]: r["median_us"] for r in rows("peers.jsonl") if r.get("median_us") and r.get("peer") == "flex"}
rec = {}
for tag in ("old", "new"):
    for r in rows(f"solder-{tag}.jsonl"):
        rec.setdefault((tag, r["dims"]["S"]), []).append(r["median_us"])
print("| cell | old r1 / r2 (µs) | new r1 / r2 (µs) | new / old (r1, r2) | Flex (µs) | old / Flex | new / Flex | 0.83× Flex |")
print("|---|---|---|---|---|---|---|---|")
for s in (1024, 4096, 16384):
    c = f"document_mask-d64-s{s}"
    o, n, f = rec.get(("old", s), []), rec.get(("new", s), []), flex.get(c)
    # round 1 is old then new; round 2 is new then old: new's r1 is n[0], old's r1 is o[0]
    q = lambda a, b: f"{a / b:.3f}" if a and b else "—"
    both = ", ".join(q(n[i], o[i]) for i in range(min(len(o), len(n))))
    best = lambda v: min(v) if v else None
    print(f"| {c} | {' / '.join(f'{v:.1f}' for v in o) or '—'} | {' / '.join(f'{v:.1f}' for v in n) or '—'} | {both or '—'} | "
          f"{f'{f:.1f}' if f else '—'} | {q(best(o), f)} | {q(best(n), f)} | {f'{0.83 * f:.1f}' if f else '—'} |")
PY
cp $O/r/docmask8.md $F/
tar czf $F/r.tgz -C $O r
grep -hE "^ *[0-9.]+ (OK|FAIL) " "$O/r/dt-attention-Id-.txt" | awk '{print $2}' | sort | uniq -c | sed 's/^/   new cases (Id-): /'
grep -hE "^ *[0-9.]+ (OK|FAIL) " $O/r/dt-attention-ids.txt | awk '{print $2}' | sort | uniq -c | sed 's/^/   ids sample: /'
cat $O/r/verify.txt 2>/dev/null | cut -c1-140
grep -E "^stamps" $O/r/stamps.log
cat $O/r/docmask8.md
say "== done"
