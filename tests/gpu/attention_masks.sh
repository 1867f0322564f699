#!/usr/bin/env bash
# GPU check of the tensor-core emitter's tile skipping and block order (docs/architecture.md, "Tile
# skipping and block order"), for a machine with an H100:
#   1. builds Solder (Release, `solder` only);
#   2. runs document_mask, causal, sliding_window and prefix_lm through the CUDA backend, each verified
#      against the float64 reference (`solder run --backend cuda`), at small multi-tile sizes (mma.sync,
#      16-row tiles), ragged sizes, paper size, paper size ragged, 64-row blocks, 16k tokens in one
#      sequence; the masks over data also with SOLDER_TILE_CLASSES=lazy (the previous behaviour) and the
#      causal ones also with SOLDER_GRID_ORDER=plain (the previous block order);
#   3. times (`solder bench`, median of CUDA-graph replays) each case at the attention suite's shapes
#      (16k tokens: S 1024 / 4096 / 16384, hd64), new against previous behaviour on the same GPU in the
#      same call: document_mask with SOLDER_TILE_CLASSES=lazy SOLDER_GRID_ORDER=plain, the causal-like
#      masks with SOLDER_GRID_ORDER=plain;
#   4. FlexAttention on the same cases (bench/peers.py --peers flex), when torch is installed.
# Usage: tests/gpu/attention_masks.sh [OUT_DIR] [--no-bench] [--no-peers]
# Writes OUT_DIR/status.tsv (one line per check), OUT_DIR/bench.tsv (program, shape, behaviour, µs) and
# OUT_DIR/summary.txt; exits 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-attention-masks}
shift || true
bench=1 peers=1
for a in "$@"; do
  case $a in --no-bench) bench=0 ;; --no-peers) peers=0 ;; esac
done
mkdir -p "$out"
if [ ! -x build/solder ] || [ "${SOLDER_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
  cmake --build build -j "$(nproc)" --target solder > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
fi
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
: > "$out/status.tsv"
check() {  # name label [ENV=VALUE ...] -- args...
  local name=$1 label=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 600 build/solder run --backend cuda "examples/$name.sol" "$@" > "$out/$name.$label.txt" 2>&1
  local rc=$?
  local emitted=$(env "${envs[@]}" build/solder emit --cuda "examples/$name.sol" "$@" 2>/dev/null | grep '^// tensor-core emitter:')
  local skip=none
  grep -q 'classified once per block' <<< "$emitted" && skip=table
  grep -q 'classified when the loop reaches it' <<< "$emitted" && skip=lazy
  grep -q 'from its index expressions' <<< "$emitted" && skip=index
  local order=plain
  grep -q 'longest rows first' <<< "$emitted" && order=longest-first
  printf '%-15s %-22s rc=%s skip=%-6s order=%-13s %s\n' "$name" "$label" "$rc" "$skip" "$order" \
    "$(grep -Eo 'verified|MISMATCH[^|]*|error[^|]*' "$out/$name.$label.txt" | head -1)" | tee -a "$out/status.tsv"
}
for n in document_mask causal sliding_window prefix_lm; do
  check $n tiles -- --small --dim S=256 --dim D=64
  check $n ragged -- --small --dim S=200 --dim D=32
  check $n paper --
  check $n paper-ragged -- --dim S=4000
  check $n rows64-ragged -- --dim S=1000 --dim B=2 --dim H=16
  check $n s16k -- --dim S=16384 --dim B=1
done
check document_mask paper.lazy SOLDER_TILE_CLASSES=lazy --
check document_mask s16k.lazy SOLDER_TILE_CLASSES=lazy -- --dim S=16384 --dim B=1
for n in causal sliding_window prefix_lm; do check $n paper.plain-order SOLDER_GRID_ORDER=plain --; done
failures=$(grep -vc 'rc=0' "$out/status.tsv")
echo "failures: $failures" | tee "$out/summary.txt"

if [ $bench = 1 ]; then
  : > "$out/bench.tsv"
  timed() {  # name shape behaviour [ENV=VALUE ...] -- dims...
    local name=$1 shape=$2 behaviour=$3; shift 3
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local json
    json=$(env "${envs[@]}" timeout 300 build/solder bench "examples/$name.sol" "$@" --json 2>> "$out/bench.err")
    local us=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["median_us"])' "$json" 2>/dev/null || echo failed)
    printf '%s\t%s\t%s\t%s\n' "$name" "$shape" "$behaviour" "$us" | tee -a "$out/bench.tsv"
  }
  for seq in 1024 4096 16384; do
    batch=$((16384 / seq)) shape="B$((16384 / seq)) S$seq D64"
    dims=(--dim B=$batch --dim S=$seq --dim D=64 --dim H=16)
    timed document_mask "$shape" new -- "${dims[@]}"
    timed document_mask "$shape" previous SOLDER_TILE_CLASSES=lazy SOLDER_GRID_ORDER=plain -- "${dims[@]}"
    for n in causal sliding_window prefix_lm; do
      timed $n "$shape" new -- "${dims[@]}"
      timed $n "$shape" previous SOLDER_GRID_ORDER=plain -- "${dims[@]}"
    done
  done
  python3 - "$out/bench.tsv" <<'PY' | tee -a "$out/summary.txt"
import collections, sys
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    name, shape, behaviour, us = line.rstrip("\n").split("\t")
    rows[(name, shape)][behaviour] = us
print(f"{'program':16} {'shape':18} {'new us':>10} {'previous us':>12} {'previous/new':>12}")
for (name, shape), r in rows.items():
    try:
        ratio = f"{float(r['previous']) / float(r['new']):.2f}"
    except (KeyError, ValueError, ZeroDivisionError):
        ratio = "-"
    print(f"{name:16} {shape:18} {r.get('new', '-'):>10} {r.get('previous', '-'):>12} {ratio:>12}")
PY
fi

if [ $bench = 1 ] && [ $peers = 1 ]; then
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    timeout 1200 python3 bench/peers.py --suite attention --peers flex --cases '^(document_mask|causal|sliding_window|prefix_lm)-d64-' \
      --out "$out/peers-flex.jsonl" > "$out/peers.log" 2>&1
    python3 - "$out/peers-flex.jsonl" <<'PY' | tee -a "$out/summary.txt"
import json, sys
print("FlexAttention (kernel time; block mask built outside the timed region):")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("record") == "peer":
        print(f"  {r['case']:28} {r['status']:8} {r.get('median_us', float('nan')):10.1f} us  verified={r.get('verified')}")
PY
  else
    echo "FlexAttention: torch with CUDA is not installed here; peers skipped" | tee -a "$out/summary.txt"
  fi
fi
[ "$failures" = 0 ]
