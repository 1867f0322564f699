#!/usr/bin/env bash
# One device call for the exponentials on the FMA pipe (issue 17, branch exp2-poly): E of each 8 of a
# consumer thread's score columns take exp2_fma (a degree-3 polynomial on the FP32 pipe) instead of
# ex2.approx (MUFU), SOLDER_ATTN_EXP2_FMA=E, against E = 0 (the default), interleaved, with cuDNN SDPA
# and FlexAttention in the same call.
#   0. the attention skeleton's device test, the exp2fma cases (exp2_fma's device bits against its host
#      form; kExp2Fma 2 / 4 / 8 in the emitter's configurations against the float64 reference) and a
#      sample of the rest (the affine two-FFMA cases), under a timeout, while every kernel compiles,
#   1. `solder run --backend cuda` (float64 reference) of vanilla / gqa / causal / alibi at paper size
#      with E = 2, vanilla and alibi small with E = 4,
#   2. `solder bench`, round 1: each cell at E = 0, 1, 2 (and 4 on vanilla and alibi S 1k),
#   3. cuDNN SDPA on vanilla / gqa / causal S 1k, causal S 4k, vanilla hd128 S 1k; Flex on alibi S 1k,
#   4. round 2 in the reverse order of modes,
#   5. with time left: ncu of vanilla S 1k at E = 0 and 1 (pipe utilisation, one kernel launch each).
#
#   bench/attention/exp2_call.sh OUTDIR SOLDER_BINARY [DEVICE_TEST_BINARY]
#
# Everything lands in OUTDIR; the summary table (summary.md) is printed last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: exp2_call.sh OUTDIR SOLDER [DEVICE_TEST]}
bin=${2:?solder binary}
test_bin=${3:-}
deadline=${DEADLINE:-150}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"
cat COMMIT 2>/dev/null | tee -a "$out/device.txt"

# (E, args) of the verification runs
cat > "$out/runs.txt" <<'EOF'
2 examples/vanilla.sol
2 examples/gqa.sol
2 examples/causal.sol
2 examples/alibi.sol
4 examples/vanilla.sol --small
4 examples/alibi.sol --small
EOF
python3 - > "$out/bench-cases.txt" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
cases = {c.id: c for c in suites.ALL_CASES if c.suite == "attention"}
for i in ["vanilla-d64-s1024", "alibi-d64-s1024", "causal-d64-s1024", "gqa-d64-s1024", "causal-d64-s4096", "vanilla-d128-s1024"]:
    c = cases[i]
    print(c.id, f"examples/{c.workload}.sol " + " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
modes_of() {  # $1 case id: the modes (E values) it is timed at
  case $1 in vanilla-d64-s1024 | alibi-d64-s1024) echo "0 1 2 4" ;; *) echo "0 1 2" ;; esac
}
# Every kernel of the call compiled first, in parallel (NVRTC, one per core), while the device test runs.
{
  while read -r e args; do echo "SOLDER_ATTN_EXP2_FMA=$e $bin bench --compile-only $args"; done < "$out/runs.txt"
  while read -r id args; do
    for e in $(modes_of "$id"); do echo "SOLDER_ATTN_EXP2_FMA=$e $bin bench --compile-only $args"; done
  done < "$out/bench-cases.txt"
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1 &
compile_pid=$!
if [ -n "$test_bin" ] && [ -x "$test_bin" ]; then
  echo "== 0. attention skeleton device test: exp2fma cases, then the affine two-ffma sample"
  timeout 40 "$test_bin" 2026 exp2fma > "$out/device-test.txt" 2>&1
  echo "   rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test.txt")"
  grep -E "^FAIL|exp2fma unit" "$out/device-test.txt" | head -8
  timeout 6 "$test_bin" 2026 "affine two-ffma" > "$out/device-test-sample.txt" 2>&1
  echo "   sample rc $? ($(( $(date +%s) - start )) s): $(tail -n 1 "$out/device-test-sample.txt")"
  grep -E "^FAIL" "$out/device-test-sample.txt" | head -4
fi
wait "$compile_pid"
echo "== compiled in $(( $(date +%s) - start )) s; errors: $(grep -ci error "$out/compile.log")"

echo "== 1. verified through the CUDA backend (float64 reference)"
: > "$out/verify.tsv"
verify_one() {  # $1 E, rest: args
  local e=$1
  shift
  SOLDER_ATTN_EXP2_FMA=$e timeout 20 "$bin" run --backend cuda "$@" > "$out/verify.log" 2>&1
  rc=$?
  printf 'E=%s %s\trc %s\t%s\n' "$e" "$*" "$rc" "$(grep -v '^$' "$out/verify.log" | tail -n 1 | cut -c1-160)" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$e-$(echo "$*" | tr ' /=' '___').log"
}
while read -r e args; do
  if [ "$(left)" -lt 80 ]; then echo "   deadline: stopped before E=$e $args"; break; fi
  verify_one "$e" $args
done < "$out/runs.txt"
echo "   passed: $(grep -c $'\trc 0\t' "$out/verify.tsv") of $(grep -c . "$out/runs.txt")"

: > "$out/solder.jsonl"
bench_one() {  # $1 E, $2 case id, rest: args
  local e=$1 id=$2
  shift 2
  local line
  line=$(SOLDER_ATTN_EXP2_FMA=$e timeout 20 "$bin" bench "$@" --json 2>>"$out/solder.err" | tail -n 1)
  echo "{\"case\": \"$id\", \"mode\": \"e$e\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "   [E=$e] $id: $(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f us" % json.loads(sys.stdin.read())["median_us"])
except Exception as e: print("failed", e)')"
}
echo "== 2. round 1 ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 45 ]; then echo "   deadline: stopped before $id"; break; fi
  for e in $(modes_of "$id"); do bench_one "$e" "$id" $args; done
done < "$out/bench-cases.txt"
echo "== 3. cuDNN SDPA and FlexAttention ($(left) s left)"
if [ "$(left)" -gt 40 ]; then
  timeout "$(( $(left) - 25 ))" python3 bench/peers.py --suite attention --no-ceilings --out "$out/peers.jsonl" \
    --cases '^((vanilla|causal|gqa)-d64-s1024|causal-d64-s4096|vanilla-d128-s1024)$' --peers sdpa_cudnn \
    --time-limit "$(( $(left) - 35 ))" >> "$out/peers.log" 2>&1
  grep -E "sdpa_cudnn .* µs|error|limit" "$out/peers.log" | tail -n 6
fi
if [ "$(left)" -gt 35 ]; then
  timeout "$(( $(left) - 20 ))" python3 bench/peers.py --suite attention --no-ceilings --out "$out/peers.jsonl" \
    --cases '^alibi-d64-s1024$' --peers flex --time-limit "$(( $(left) - 30 ))" >> "$out/peers.log" 2>&1
  grep -E "flex .* µs|error|limit" "$out/peers.log" | tail -n 2
fi
echo "== 4. round 2, modes reversed ($(left) s left)"
while read -r id args; do
  if [ "$(left)" -lt 10 ]; then echo "   deadline: stopped before $id"; break; fi
  for e in $(modes_of "$id" | tr ' ' '\n' | tac); do bench_one "$e" "$id" $args; done
done < "$out/bench-cases.txt"
if [ "$(left)" -gt 25 ] && command -v ncu > /dev/null; then
  echo "== 5. ncu of vanilla S 1k at E = 0 and 1 ($(left) s left)"
  args=$(grep '^vanilla-d64-s1024 ' "$out/bench-cases.txt" | cut -d' ' -f2-)
  for e in 0 1; do
    [ "$(left)" -lt 12 ] && break
    SOLDER_ATTN_EXP2_FMA=$e timeout "$(( $(left) - 5 ))" ncu --launch-count 1 --section ComputeWorkloadAnalysis --section SpeedOfLight \
      --section InstructionStats "$bin" bench $args --replays 1 --calls-per-replay 1 > "$out/ncu-e$e.txt" 2>&1
    grep -iE "Duration|Issue Slots|Pipe|SM Busy|Executed Ipc|Tensor|XU|FMA" "$out/ncu-e$e.txt" | head -20
  done
fi

python3 "$here/exp2_table.py" "$out/solder.jsonl" "$out/peers.jsonl" > "$out/summary.md" 2>&1
echo "== done in $(( $(date +%s) - start )) s"
cat "$out/summary.md"
