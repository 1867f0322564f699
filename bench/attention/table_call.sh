#!/usr/bin/env bash
# The attention table's device call (issue 17, branch attn-table, 2026-11-27): Solder's current kernels
# and the peers, in one call, on the suite cells that no committed call measured on the current kernel
# with its peer (bench/attention/status.py lists them). Run from the root staged by
# bench/attention/table_stage.sh, with the CuTe headers in ../cutlass:
#   cd .devcarry/attn-table && DEADLINE=150 bash bench/attention/table_call.sh
#
#   1. every cell's kernels compile in parallel (`solder bench --compile-only`, one per core), in the
#      background, while
#   2. cuDNN SDPA and SDPA flash run on the cells whose target is cuDNN (vanilla, causal, gqa) and on
#      diff_attn (bench/peers.py, CUDA-graph replays, median);
#   3. `solder bench --json` of the cells in ORDER (the cells whose status is least known first);
#   4. FlexAttention with --compile-mode default (softcap, sliding_window, prefix_lm, diff_attn, then
#      alibi and the vanilla / causal / gqa cells at S 4k / 16k), each step under the deadline; with
#      time left, torch.compile (default mode) on the hd64 vanilla / gqa cells, one Flex cell in
#      max-autotune (its compile time against default's) and Flex max-autotune on evoformer B1 / B8;
#   5. summary.md: each Solder record against the best peer of this call (bench/merged_table.py).
# No step starts with less than its reserve left of DEADLINE (seconds from the start). Output under
# $OUT/r: device.txt, solder.jsonl, peers.jsonl, peers.log, compile.log, summary.md, log.txt.
set -uo pipefail
O=${OUT:-/tmp/out}/r; mkdir -p "$O"
exec > >(tee "$O/log.txt") 2>&1
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$O/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$O/device.txt"; echo "solder $(cat COMMIT)" >> "$O/device.txt"

# bench/attention/table.cells (staged as cells.txt) lists the cells, most wanted first; the stage wrote
# their solder command lines, in that order, to cmds.txt.
C=/tmp/table-cmds.txt; sed "s|OUTFILE|$O/solder.jsonl|" cmds.txt > "$C"
stamp "$(wc -l < "$C") solder cells"
sed 's/--json >>.*/--compile-only/; s/^timeout [0-9]*/timeout 150/' "$C" |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$O/compile.log" 2>&1 &
compile_pid=$!

# peers GROUP_REGEX PEERS RESERVE [ARGS...]: one bench/peers.py run, stopped RESERVE seconds before the deadline
peers() {
  local cases=$1 names=$2 reserve=$3; shift 3
  [ "$(left)" -lt $((reserve + 15)) ] && { stamp "deadline: skipped peers $names on $cases"; return; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - reserve )) python3 bench/peers.py --no-ceilings --out "$O/peers.jsonl" \
    --suite attention --cases "$cases" --peers "$names" --reps 30 --time-limit $(( $(left) - reserve - 10 )) "$@" \
    >> "$O/peers.log" 2>&1 < /dev/null
  stamp "peers $names on $cases: rc $?, $(grep -c '"status": "ok"' "$O/peers.jsonl" 2>/dev/null) ok records so far"
}

stamp "== 2. cuDNN and flash while the kernels compile"
peers '^(vanilla|causal|gqa|diff_attn)-' sdpa_cudnn,sdpa_flash 100
wait "$compile_pid"
stamp "compiled; errors: $(grep -ci error "$O/compile.log")"

stamp "== 3. solder bench"
while IFS= read -r line; do
  [ "$(left)" -lt 45 ] && { stamp "deadline before: $line"; break; }
  sh -c "$line" 2>> "$O/solder.err" < /dev/null || stamp "failed: $line"
done < "$C"
stamp "solder records $(wc -l < "$O/solder.jsonl" 2>/dev/null || echo 0) of $(wc -l < "$C")"

stamp "== 4. FlexAttention (compile mode default)"
peers '^(softcap|sliding_window|prefix_lm|diff_attn)-' flex 8 --compile-mode default
peers '^alibi-|^(vanilla|causal|gqa)-d(64|128)-s(4096|16384)$' flex 8 --compile-mode default
peers '^(vanilla|gqa)-d64-' compile 8 --compile-mode default
peers '^softcap-d64-s4096$' flex 5 --compile-mode max-autotune-no-cudagraphs
peers '^evoformer-b(1|8)-d64$' flex 5 --compile-mode max-autotune-no-cudagraphs

python3 bench/merged_table.py "$O" > "$O/summary.md"
stamp "== done ($(left) s left)"
cat "$O/summary.md"
