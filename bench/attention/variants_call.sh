#!/usr/bin/env bash
# One device call for the attention variants on the skeleton (issue 17, branch attn-variants): the
# variants verified through the CUDA backend (float64 reference), `solder bench` of their suite cells
# with cuDNN SDPA and FlexAttention in the same call (emit_session.sh), then ncu of the cells named in
# NCU_CASES (default: alibi S 1k and sliding_window S 16k).
#
#   bench/attention/variants_call.sh OUTDIR [SOLDER_BINARY]
#
# Env: CASES, VERIFY, DEADLINE (passed to emit_session.sh; defaults below), NCU_CASES ('|'-separated
# `solder run` arguments), NCU_TIMEOUT (seconds per profile, default 60).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: variants_call.sh OUTDIR [SOLDER_BINARY]}
bin=${2:-build/solder}
mkdir -p "$out"
v() { printf '%s|' "$@"; }
export VERIFY=${VERIFY:-$(v \
  "examples/alibi.sol --small" "examples/alibi.sol" "examples/alibi.sol --dim B=1 --dim S=16384" "examples/alibi.sol --dim D=128" \
  "examples/sliding_window.sol --small" "examples/sliding_window.sol" "examples/sliding_window.sol --dim B=4 --dim S=4096" \
  "examples/sliding_window.sol --dim B=1 --dim S=16384" "examples/sliding_window.sol --dim D=128 --dim B=1 --dim S=16384" \
  "examples/sliding_window.sol --dim B=1 --dim H=2 --dim S=512 --dim WIN=100" \
  "examples/prefix_lm.sol --small" "examples/prefix_lm.sol" "examples/prefix_lm.sol --dim B=1 --dim S=16384" \
  "examples/causal.sol --small" "examples/causal.sol" "examples/causal.sol --dim B=4 --dim S=4096" "examples/causal.sol --dim D=128" \
  "examples/softcap.sol" "examples/vanilla.sol" "examples/gqa.sol" \
  "examples/alibi.sol --small --dim S=256 --dim D=64")}
VERIFY=${VERIFY%|}
export CASES=${CASES:-'^(alibi|sliding_window|prefix_lm|causal|softcap)-d64-s(1024|4096|16384)$'}
export DEADLINE=${DEADLINE:-290}
bash "$here/emit_session.sh" "$out" "$bin"

# ncu: one plain launch of each named cell (solder run launches the kernel once, outside a graph).
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  n=0
  echo "${NCU_CASES:-examples/alibi.sol|examples/sliding_window.sol --dim B=1 --dim S=16384}" | tr '|' '\n' | while IFS= read -r args; do
    [ -z "$args" ] && continue
    n=$((n + 1))
    m=smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
    m=$m,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct
    m=$m,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct
    m=$m,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct
    m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__warp_issue_stalled_selected_per_warp_active.pct
    m=$m,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct
    m=$m,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
    echo "== ncu $n: $args"
    timeout "${NCU_TIMEOUT:-60}" "$NCU" --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics "$m" \
      -k regex:fused --launch-count 1 "$bin" run --backend cuda $args > "$out/ncu$n.txt" 2>&1
    grep -E "fused|Duration|Compute \(SM\) Throughput|DRAM Throughput|Issued Warp|stalled|gmma|pipe_xu|pipe_fma|Registers|ERR" "$out/ncu$n.txt" | cut -c1-140 | head -30
  done
else
  echo "no ncu"
fi
