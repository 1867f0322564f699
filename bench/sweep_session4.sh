#!/usr/bin/env bash
# Session 4 tile sweep (one device call): memory-bound kernels over --streaming-elements, moe_routing R7
# over --tile-cols, sliding window over --tile-rows / row groups; every timed choice is also verified
# with `solder run --backend cuda` and the same options. Prints one line per (case, choice).
# Usage: bench/sweep_session4.sh OUTDIR      (needs build/solder and a GPU)
set -u
cd "$(dirname "$0")/.."
out=${1:-build/sweep}
mkdir -p "$out"
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
cases=(
  "V8|examples/variance.sol --dim BS=1024 --dim L=32768|--streaming-elements 2048;--streaming-elements 4096;--streaming-elements 8192;--streaming-elements 16384"
  "I8|examples/inertia.sol --dim BS=1024 --dim N=32768|--streaming-elements 2048;--streaming-elements 4096;--streaming-elements 8192;--streaming-elements 16384"
  "R7|examples/moe_routing.sol --dim T=2048 --dim HID=2048 --dim E=128 --dim K=8|--tile-cols 64;--tile-cols 128"
  "SW|examples/sliding_window.sol --dim B=4 --dim S=4096 --dim D=64 --dim H=16|--tile-rows 128;--tile-rows 64;--tile-rows 64 ROWGROUPS1"
  "EVO32|examples/evoformer.sol --dim B=32|--tile-rows 128"
)
# compile every choice in parallel first
for c in "${cases[@]}"; do
  IFS='|' read -r label args choices <<< "$c"
  IFS=';' read -ra list <<< "$choices"
  for ch in "${list[@]}"; do
    env_=""; [[ $ch == *ROWGROUPS1 ]] && env_="SOLDER_MMA_ROW_GROUPS=1"; ch=${ch% ROWGROUPS1}
    echo "env $env_ timeout 300 build/solder bench $args $ch --compile-only"
  done
done | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
printf '%-6s %-28s %10s %10s %8s  %s\n' case choice median_us min_us replays verify
for c in "${cases[@]}"; do
  IFS='|' read -r label args choices <<< "$c"
  IFS=';' read -ra list <<< "$choices"
  for ch in "${list[@]}"; do
    env_=""; [[ $ch == *ROWGROUPS1 ]] && env_="SOLDER_MMA_ROW_GROUPS=1"; tag=$ch; ch=${ch% ROWGROUPS1}
    j=$(env $env_ timeout 200 build/solder bench $args $ch --json 2> "$out/err.txt" | tail -1)
    v=$(env $env_ timeout 300 build/solder run --backend cuda $args $ch 2>&1 | tail -1)
    echo "$label $tag $j" >> "$out/sweep.jsonl"
    python3 - "$label" "$tag" "$j" "$v" <<'PY'
import json, sys
label, tag, j, v = sys.argv[1:5]
try:
    d = json.loads(j); print('%-6s %-28s %10.2f %10.2f %8d  %s' % (label, tag, d['median_us'], d['min_us'], d['replays'], v[-60:]))
except Exception:
    print('%-6s %-28s %s  %s' % (label, tag, 'bench error', v[-60:]))
PY
  done
done
