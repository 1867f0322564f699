#!/usr/bin/env bash
# One device call for document_mask and diff_attn on the attention skeleton (issue 17, branch
# attn-docmask):
#   0. the attention skeleton's device test (a prebuilt binary: data-mask tile skipping, documents of
#      random lengths incl. 1, whole tiles masked, ragged and seq_q != seq_k shapes, fixed lead blocks),
#   1. document_mask and diff_attn verified through the CUDA backend at small and paper sizes (float64
#      reference), the other suite shapes too,
#   2. `solder bench` of the suite's document_mask and diff_attn cells, Solder first, then FlexAttention
#      and cuDNN SDPA in the same call (emit_session.sh),
#   3. with NCU=1 and time left: ncu of document_mask S1024 (one plain launch through `solder run`).
#
#   bench/attention/docmask_diff_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR (tar it into $OUT). DEADLINE (seconds, default 200) bounds steps 1-2.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: docmask_diff_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
mkdir -p "$out"
start=$(date +%s)
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
v() { printf '%s|' "$@"; }
runs=$(v \
  "examples/document_mask.sol --small" "examples/document_mask.sol" \
  "examples/document_mask.sol --dim B=4 --dim S=4096" "examples/document_mask.sol --dim B=1 --dim S=16384" \
  "examples/document_mask.sol --dim D=128 --dim B=2" \
  "examples/diff_attn.sol --small" "examples/diff_attn.sol" "examples/diff_attn.sol --dim D=128" \
  "examples/diff_attn.sol --dim B=1 --dim S=16384")
runs=${VERIFY:-${runs%|}}
echo "$runs" | tr '|' '\n' > "$out/runs-docmask.txt"
python3 - > "$out/bench-cases.txt" <<'PY'
import re, sys; sys.path.insert(0, "bench"); import suites
for c in suites.ALL_CASES:
    if c.suite == "attention" and re.search(r"^(document_mask|diff_attn)-", c.id):
        print(f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
cat "$out/runs-docmask.txt" "$out/bench-cases.txt" | sed "s|^|$bin bench --compile-only |" |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test"
  timeout 90 "$test_bin" 2026 > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL" "$out/device-test.txt" | head -5
  grep -E "data|half" "$out/device-test.txt" | cut -c1-160 | head -40
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"
echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify-docmask.tsv"
while IFS= read -r args; do
  [ -z "$args" ] && continue
  timeout 60 "$bin" run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\trc %s\t%s\n' "$args" "$rc" "$(grep -v '^$' "$out/verify.log" | grep -E 'output o|verified|error|FAIL|mismatch' | tr '\n' ' ' | cut -c1-200)" | tee -a "$out/verify-docmask.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done < "$out/runs-docmask.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify-docmask.tsv") of $(wc -l < "$out/runs-docmask.txt")"
export SKIP_VERIFY=1
unset VERIFY
export CASES=${CASES:-'^(document_mask|diff_attn)-'}
export PEERS=${PEERS:-flex,sdpa_cudnn}
export DEADLINE=${DEADLINE:-200}
bash "$here/emit_session.sh" "$out" "$bin"
NCU=${NCU:-0}
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$NCU" = 1 ] && [ -n "$NCU_BIN" ]; then
  echo "== 3. ncu of document_mask S1024"
  timeout 60 "$NCU_BIN" --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:fused_o -c 1 \
    "$bin" run --backend cuda examples/document_mask.sol > "$out/ncu-docmask.txt" 2>&1
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Stall" "$out/ncu-docmask.txt" | head -20
fi
echo "== done in $(( $(date +%s) - start )) s"
