#!/usr/bin/env bash
# The device call of the whole-contraction work (issue 15): the default GPU path, where contractions
# with a long K run whole on the sm_90a GEMM skeleton (src/fusion/whole_contractions.h) and the rest
# fuses around them. Verified end to end on the programs it changes, then timed against the fused path
# without the skeleton (--no-skeleton) and the peers (torch eager, torch.compile), all in one call.
#
#   bench/whole_session.sh OUTDIR [SOLDER_BINARY]
#
# Needs: a solder binary (default build/solder), the CuTe headers (SOLDER_CUTLASS_INCLUDE), torch.
# Env: VERIFY ('|'-separated `solder run` arguments), CASES (gemm_chains/reduction case ids, default
# below), NO_SKELETON=0 (time the default path only), PEERS_LIMIT (seconds for the peers, default
# 200), EXTRA (a command run at the end).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/whole_session.sh OUTDIR [SOLDER_BINARY]}
bin=${2:-build/solder}
mkdir -p "$out" build
[ "$bin" != build/solder ] && cp "$bin" build/solder
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

dims_of() {  # the --dim flags of a suite case id (bench/suites.py)
  python3 - "$1" <<'PY'
import sys; sys.path.insert(0, "bench"); import suites
c = [c for c in suites.ALL_CASES if c.id == sys.argv[1]][0]
print(c.workload, " ".join(f"--dim {k}={v}" for k, v in c.overrides.items()))
PY
}

echo "== 1. verified through the CUDA backend (default path: whole contractions + fusion)"
: > "$out/verify.tsv"
verify=${VERIFY:-"examples/ffn.sol|examples/ffn.sol --dim M=512|examples/gated_ffn.sol|examples/moe_routing.sol|examples/linear_relu_backward.sol|examples/mla_decode.sol|examples/ffn.sol --small|examples/vanilla.sol|examples/llama_decode.sol"}
IFS='|' read -r -a verify_list <<< "$verify"
for args in "${verify_list[@]}"; do
  start=$(date +%s%N)
  timeout 200 build/solder run --backend cuda $args > "$out/verify.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s ms\t%s\n' "$args" "$rc" $(( ($(date +%s%N) - start) / 1000000 )) "$(tail -n 1 "$out/verify.log")" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail-$(echo "$args" | tr ' /=' '___').log"
done

echo "== 2. timing: default vs --no-skeleton"
cases=${CASES:-"ffn-S1 ffn-S3 ffn-S8 ffn-G5 gated_ffn-S1 gated_ffn-S3 gated_ffn-S8 gated_ffn-G5 moe_routing-R3 moe_routing-R7"}
: > "$out/solder.jsonl"
for id in $cases; do
  read -r workload dims < <(dims_of "$id")
  for mode in default no-skeleton; do
    flag=""; [ $mode = no-skeleton ] && flag="--no-skeleton"
    case $id in ffn-*|gated_ffn-*) [ $mode = no-skeleton ] && continue ;; esac
    [ "${NO_SKELETON:-1}" = 0 ] && [ $mode = no-skeleton ] && continue  # fused GEMM chains: 9-12x slower (contractions-session.md)
    line=$(timeout 200 build/solder bench "examples/$workload.sol" $dims $flag --json 2>>"$out/bench.err" | tail -n 1)
    echo "{\"case\": \"$id\", \"mode\": \"$mode\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
    echo "$id $mode: $(echo "$line" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us (floor %.1f us), %d kernels" % (r["median_us"], r["floor_us"], r.get("kernels", 0)))
except Exception as e: print("failed", e)')"
  done
done

echo "== 3. peers (same call)"
regex="^($(echo $cases | tr ' ' '|'))$"
timeout $(( ${PEERS_LIMIT:-200} + 100 )) python3 bench/peers.py --suite all --cases "$regex" --peers eager,compile --out "$out/peers.jsonl" \
  --time-limit ${PEERS_LIMIT:-200} --no-ceilings 2>&1 | tail -n 25
if [ -n "${EXTRA:-}" ]; then echo "== 4. $EXTRA"; bash -c "$EXTRA"; fi
echo "== done"
