#!/usr/bin/env bash
# The device call of issue 17's emitter integration: every attention example verified through the CUDA
# backend (small and paper sizes; the attention kernels now instantiate device/solder/attention), then
# `solder bench` of the attention suite's cases and the peers (cuDNN SDPA, FlexAttention, torch.compile)
# in the same call.
#
#   bench/attention/emit_session.sh OUTDIR [SOLDER_BINARY]
#
# Env: CASES (regular expression on bench/suites.py case ids), PEERS (peers.py --peers), SKIP_VERIFY=1,
# VERIFY ('|'-separated `solder run` arguments instead of every attention example at both sizes),
# EXTRA_VERIFY (more of them),
# SKIP_PEERS=1, DEADLINE (seconds from the start after which no new step starts; default 380).
set -uo pipefail
cd "${SOLDER_ROOT:-$(dirname "$0")/../..}"
out=${1:?usage: bench/attention/emit_session.sh OUTDIR [SOLDER_BINARY]}
bin=${2:-build/solder}
deadline=${DEADLINE:-380}
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
cases=${CASES:-'^(vanilla|causal|gqa)-d(64|128)-s(1024|4096|16384)$'}

# The runs and benches of this call, compiled in parallel first (NVRTC, one per core).
examples="vanilla causal gqa alibi softcap sliding_window prefix_lm document_mask diff_attn rope_attention evoformer llama_decode mla_decode paged_decode"
: > "$out/runs.txt"
if [ -n "${VERIFY:-}" ]; then
  echo "$VERIFY" | tr '|' '\n' > "$out/runs.txt"
elif [ "${SKIP_VERIFY:-0}" != 1 ]; then
  for e in $examples; do echo "examples/$e.sol --small" >> "$out/runs.txt"; echo "examples/$e.sol" >> "$out/runs.txt"; done
  for e in vanilla causal gqa; do echo "examples/$e.sol --dim D=128" >> "$out/runs.txt"; done
  echo "examples/causal.sol --dim B=1 --dim S=4096 --dim D=128" >> "$out/runs.txt"
  echo "examples/vanilla.sol --dim S=2048 --dim B=2 --dim H=3" >> "$out/runs.txt"
fi
[ -n "${EXTRA_VERIFY:-}" ] && echo "$EXTRA_VERIFY" | tr '|' '\n' >> "$out/runs.txt"
python3 bench/suites.py --suite attention --cases "$cases" --solder-commands --solder "$bin" --compile-only --timeout 300 > "$out/bench-compile.txt"
{
  sed "s|^|$bin bench --compile-only |" "$out/runs.txt"
  cat "$out/bench-compile.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference, fresh random inputs, poisoned outputs)"
: > "$out/verify.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  if [ "$(left)" -lt 200 ]; then echo "   deadline: not run: $args" | tee -a "$out/verify.tsv"; continue; fi
  t0=$(date +%s%N)
  timeout 120 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  path=$(grep -o "attention skeleton\|tensor-core emitter" "$out/verify.log" | head -1)
  printf '%s\trc %s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - t0) / 1000000 )) "$(grep -v '^$' "$out/verify.log" | tail -n 1)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs.txt"
grep -c "rc 0" "$out/verify.tsv" | sed 's/^/   passed: /'

echo "== 2. solder bench, $(left) s left"
: > "$out/solder.jsonl"
python3 - "$cases" > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(sys.argv[1], c.id):
        print(c.id, c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
while read -r id workload dims; do
  if [ "$(left)" -lt 60 ]; then echo "   deadline: stopped before $id"; break; fi
  line=$(timeout 100 "$bin" bench "examples/$workload.sol" $dims --json 2>> "$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us, %.0f TFLOP/s" % (r["median_us"], r.get("tflops", 0)))
except Exception as e: print("failed", e)')"
done < "$out/bench-cases.txt"

if [ "${SKIP_PEERS:-0}" != 1 ] && [ "$(left)" -gt 40 ]; then
  echo "== 3. peers, $(left) s left"
  timeout "$(( $(left) + 10 ))" python3 bench/peers.py --suite attention --cases "$cases" --peers "${PEERS:-sdpa_cudnn,flex}" \
    --out "$out/peers.jsonl" --time-limit "$(( $(left) - 30 ))" --no-ceilings 2>&1 | tail -n 30
fi
echo "== done in $(( $(date +%s) - start )) s"
