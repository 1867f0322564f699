#!/usr/bin/env bash
# The ninth session's merged-tree call (integrator), run from a mini repository root carried to the device
# (build/solder and bin/test_sm90_* built on the build machine, examples/, bench/, tests/gpu/, COMMIT),
# with the CuTe headers in ../cutlass:  cd <root> && DEADLINE=500 bash merged_s9_call.sh
#   1. device tests: attention skeleton, GEMM skeleton (deep rings, 2-D clusters), prologue;
#   2. tests/gpu/run.sh: every example at small and paper sizes through --backend cuda (float64 reference);
#   3. gemm_chains (36 cells) and moe_routing R1-R8: solder bench, then eager (cuBLAS) in the same call;
#   4. spot checks of the other branches on the merged binary: conv C1/C5/C6/C7, attention S1k hd64
#      vanilla/gqa/causal, diff_attn hd128 S1k (solder only; their peers are in the branches' calls).
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-500} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
# compile the suites' kernels in the background while the device tests run
{ python3 bench/suites.py --suite gemm_chains --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite reductions --cases '^moe_routing-' --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite contractions --cases '^conv_chain-' --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite attention --cases '^(vanilla|gqa|causal)-d64-s1024|^diff_attn-d128-s1024' --solder-commands --compile-only --timeout 120
} 2>/dev/null | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &
echo "== 1. device tests"
timeout 120 bin/test_sm90_attention 2026 > $O/r/dt-attention.txt 2>&1; echo "   attention rc $? $(tail -n1 $O/r/dt-attention.txt) ($(( $(date +%s)-start )) s)"
timeout 150 bin/test_sm90_gemm 2026 > $O/r/dt-gemm.txt 2>&1; echo "   gemm rc $? $(tail -n1 $O/r/dt-gemm.txt) ($(( $(date +%s)-start )) s)"
timeout 80 bin/test_sm90_gemm_prologue 2026 > $O/r/dt-prologue.txt 2>&1; echo "   prologue rc $? $(tail -n1 $O/r/dt-prologue.txt) ($(( $(date +%s)-start )) s)"
grep -h "^FAIL" $O/r/dt-*.txt | head -5
echo "== 2. tests/gpu/run.sh ($(left) s left)"
SOLDER_REBUILD=0 SOLDER_GPU_PARALLEL=8 timeout $(( $(left) - 200 )) bash tests/gpu/run.sh $O/run > $O/r/run-summary.txt 2>&1; echo "   rc $?"
grep -E "MISMATCH|ERROR" $O/r/run-summary.txt | head; tail -n1 $O/r/run-summary.txt
wait
echo "== 3. gemm_chains + moe_routing ($(left) s left)"
: > $O/r/solder-suites.jsonl
{ python3 bench/suites.py --suite gemm_chains --solder-commands --timeout 30 --out $O/r/solder-suites.jsonl
  python3 bench/suites.py --suite reductions --cases '^moe_routing-' --solder-commands --timeout 30 --out $O/r/solder-suites.jsonl; } 2>/dev/null > /tmp/cmds.txt
while IFS= read -r line; do [ "$(left)" -lt 110 ] && { echo "   deadline before: $line"; break; }; sh -c "$line" 2>>$O/r/solder.err; done < /tmp/cmds.txt
echo "   solder records $(wc -l < $O/r/solder-suites.jsonl) of $(wc -l < /tmp/cmds.txt)"
PYTHONUNBUFFERED=1 timeout $(( $(left) - 50 )) python3 bench/peers.py --suite gemm_chains --peers eager --no-ceilings --out $O/r/peers-chains.jsonl --time-limit 45 > $O/r/peers.log 2>&1
PYTHONUNBUFFERED=1 timeout $(( $(left) - 35 )) python3 bench/peers.py --suite reductions --cases '^moe_routing-' --peers eager --no-ceilings --out $O/r/peers-moe.jsonl --time-limit 20 >> $O/r/peers.log 2>&1
echo "== 4. spot checks ($(left) s left)"
{ python3 bench/suites.py --suite contractions --cases '^conv_chain-' --solder-commands --timeout 25 --out $O/r/spot.jsonl
  python3 bench/suites.py --suite attention --cases '^(vanilla|gqa|causal)-d64-s1024|^diff_attn-d128-s1024' --solder-commands --timeout 25 --out $O/r/spot.jsonl; } 2>/dev/null > /tmp/spot.txt
while IFS= read -r line; do [ "$(left)" -lt 15 ] && break; sh -c "$line" 2>>$O/r/solder.err; done < /tmp/spot.txt
python3 - $O/r <<'PY'
import json, sys, os, re
d = sys.argv[1]
def rows(f):
    p = os.path.join(d, f)
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")] if os.path.exists(p) else []
peers = [r for r in rows("peers-chains.jsonl") + rows("peers-moe.jsonl") if r.get("median_us")]
def match(r):
    for q in peers:
        if q.get("program") == r.get("program") and all(r.get("dims", {}).get(k) == v for k, v in q.get("dims", {}).items()):
            return q
met = tot = 0
for r in rows("solder-suites.jsonl"):
    q = match(r) or {}; us = r.get("median_us"); p = q.get("median_us")
    cid = q.get("case") or (r.get("program", "?") + str(r.get("dims")))
    ratio = us / p if us and p else None
    if ratio: tot += 1; met += ratio <= 1.0
    print(f"{str(cid):28s} solder {us if us else '-':>10} eager {p if p else '-':>10} ratio {('%.3f' % ratio) if ratio else '-'}")
print(f"cells at or under 1.0x eager: {met} of {tot}")
for r in rows("spot.jsonl"):
    print(f"spot {r.get('program')} {r.get('dims')} {r.get('kernels')} kernels {r.get('median_us')}")
PY
tar czf $O/run.tgz -C $O run 2>/dev/null; tar czf $O/r.tgz -C $O r
echo "== done ($(left) s left)"
