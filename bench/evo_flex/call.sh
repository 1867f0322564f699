#!/usr/bin/env bash
# evo-flex's device call (issues 15 / 17, nineteenth session), from the mini root bench/evo_flex/stage.sh
# stages (CuTe headers in ../cutlass, the kernels compiled ahead in kernels.tar.xz):
#   cd .devcarry/evo-flex && DEADLINE=118 bash bench/evo_flex/call.sh     (DRY_RUN=1: the commands, no GPU)
#   bash bench/evo_flex/call.sh --checks                                  (the checks' command lines)
#   1. checks, each under 45 s, 6 at a time: `solder run --backend cuda` (against the float64 reference) of
#      the evoformer suite cells and of evoformer at head dim 256 (paper size, small, ragged S2), the kernels
#      the planner now tiles within the writer's shared memory; B32's (host inputs, ~30-50 s) under 100 s in
#      the background through phases 2 and 3; into r/checks.txt;
#   2. `solder bench` of evoformer at head dim 256 (a time for the record, no peer), into r/hd256.jsonl;
#   3. bench/merged_call.sh with bench/evo_flex/evoformer.spots, two rounds interleaved: Solder's four cells,
#      FlexAttention with its tile fixed per head dim (FLEX_CONFIGS, peers.py --flex-configs: default-mode
#      compiles, seconds a cell, instead of max-autotune's 15-40 s) and cuDNN SDPA; the SM clock logged.
# $OUT gets r.tgz (merged_call.sh's r/, with checks.txt and hd256.jsonl) and call.log.
set -uo pipefail
CHECKS=(
  "build/solder run --backend cuda examples/evoformer.sol --dim B=1 --dim S1=256 --dim S2=256 --dim H=4 --dim D=64"
  "build/solder run --backend cuda examples/evoformer.sol --dim B=8 --dim S1=256 --dim S2=256 --dim H=4 --dim D=64"
  "build/solder run --backend cuda examples/evoformer.sol --dim B=8 --dim S1=256 --dim S2=256 --dim H=4 --dim D=128"
  "build/solder run --backend cuda examples/evoformer.sol --dim D=256"
  "build/solder run --backend cuda examples/evoformer.sol --dim B=1 --dim S1=4 --dim S2=16 --dim H=2 --dim D=256"
  "build/solder run --backend cuda examples/evoformer.sol --dim S1=8 --dim S2=200 --dim D=256"
)
# B32's check draws 2^31 input elements on the host (solder run's reference needs them there), ~30-50 s:
# it runs in the background from the start, beside the other checks and the timings (its GPU part, the
# upload and one call, takes milliseconds), and is collected at the end
LONG_CHECK="build/solder run --backend cuda examples/evoformer.sol --dim B=32 --dim S1=256 --dim S2=256 --dim H=4 --dim D=64"
if [ "${1:-}" = --checks ]; then printf '%s\n' "$LONG_CHECK" "${CHECKS[@]}"; exit 0; fi
# r/ is written under /tmp/mc (merged_call.sh's OUT: its loose files would take the device tool's 8 places);
# $OUT gets r.tgz, packed after every phase, and call.log
RET=${OUT:-/tmp/out}; O=/tmp/mc; mkdir -p "$RET" "$O/r"
DRY=${DRY_RUN:-0}
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export SOLDER_COMMIT=$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD)
FLEX_CONFIGS=${FLEX_CONFIGS:-64:128x64w4s3;128:128x64w8s2+64x64w4s3}
start=$(date +%s); DEADLINE=${DEADLINE:-120}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
[ "$DRY" = 1 ] || exec > >(tee -a "$RET/call.log") 2>&1
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }

stamp "== 0. $(date -u +%FT%TZ) commit $SOLDER_COMMIT $([ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
if [ "$DRY" != 1 ]; then
  bash bench/unpack_staged.sh
  [ -f kernels.tar.xz ] && python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
    stamp "   $(ls .cache/kernels | wc -l) cached kernels unpacked"
fi

stamp "== 1. checks against the float64 reference"
if [ "$DRY" = 1 ]; then
  echo "   (background) timeout 100 $LONG_CHECK"
  printf '   timeout 45 %s\n' "${CHECKS[@]}"
else
  ( o=$(timeout 100 $LONG_CHECK 2>&1); rc=$?
    printf "%s rc %s: %s\n" "$(echo "$o" | grep -E "verified|MISMATCH" | tr "\n" " " | cut -c1-200)" "$rc" "$LONG_CHECK" > "$O/long-check.txt" ) &
  long_pid=$!
  printf '%s\n' "${CHECKS[@]}" |
    xargs -d '\n' -P 6 -I{} sh -c 'o=$(timeout 45 {} 2>&1); rc=$?; printf "%s rc %s: %s\n" "$(echo "$o" | grep -E "verified|MISMATCH" | tr "\n" " " | cut -c1-200)" "$rc" "{}"' \
    > "$O/r/checks.txt"
  cat "$O/r/checks.txt"; tar czf "$RET/r.tgz" -C "$O" r
fi

stamp "== 2. evoformer at head dim 256, timed ($(left) s left)"
H256="build/solder bench examples/evoformer.sol --dim D=256 --json"
if [ "$DRY" = 1 ]; then echo "   timeout 20 $H256"
else timeout 20 $H256 > "$O/r/hd256.jsonl" 2> "$O/r/hd256.err"; echo "   rc $? $(cut -c1-200 "$O/r/hd256.jsonl")"; fi

stamp "== 3. the four cells against Flex (tile fixed: $FLEX_CONFIGS) and cuDNN, two rounds ($(left) s left)"
# merged_call.sh starts a Solder step only with 60 s of its DEADLINE left: give it the call's time + 55
OUT=$O DRY_RUN=$DRY DEVICE_TESTS="" RUN_SH=0 ROUNDS=${ROUNDS:-2} DEADLINE=$(( $(left) + 55 )) \
  PEER_ARGS="--reps 50 --flex-configs '$FLEX_CONFIGS'" SPOTS=bench/evo_flex/evoformer.spots \
  timeout $(( $(left) > 8 ? $(left) - 4 : 4 )) bash bench/merged_call.sh
if [ "$DRY" != 1 ]; then
  wait $long_pid; cat "$O/long-check.txt" >> "$O/r/checks.txt"; rm -f "$O/long-check.txt"
  stamp "   the background check: $(tail -n1 "$O/r/checks.txt" | cut -c1-160)"
  tar czf "$RET/r.tgz" -C "$O" r
fi
stamp "== done ($(left) s left)"
