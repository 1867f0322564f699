#!/usr/bin/env bash
# GPU check of the tensor-core emitter's tile skipping and block order (docs/architecture.md, "Tile
# skipping and block order"), for a machine with an H100:
#   1. builds Solder (Release, `solder` only; SOLDER_REBUILD=0 keeps an existing build/solder);
#   2. compiles every kernel below into the NVRTC cache, all cores in parallel;
#   3. runs document_mask, causal, sliding_window and prefix_lm through the CUDA backend, each verified
#      against the float64 reference (`solder run --backend cuda`; 8 at a time): small multi-tile sizes
#      (mma.sync, 16-row tiles), ragged sizes, paper size, paper size ragged, 64-row blocks, 16k tokens
#      in one sequence; document_mask also with SOLDER_TILE_CLASSES=lazy (the previous behaviour) and the
#      causal-like masks also with SOLDER_GRID_ORDER=plain (the previous block order);
#   4. times each at the attention suite's shapes (16k tokens: S 1024 / 4096 / 16384, hd64) with
#      `solder bench` (median of CUDA-graph replays), one at a time, new against previous behaviour in
#      the same call: document_mask against SOLDER_TILE_CLASSES=lazy SOLDER_GRID_ORDER=plain, the
#      causal-like masks against SOLDER_GRID_ORDER=plain;
#   5. FlexAttention on the document_mask cases (bench/peers.py --peers flex; PEER_CASES widens the
#      regular expression), when torch with CUDA is installed.
# No step starts after DEADLINE_S seconds (default 540); what ran is in OUT_DIR.
# Usage: tests/gpu/attention_masks.sh [OUT_DIR] [--no-checks] [--no-bench] [--no-peers]
#   (a second call on a warm machine: SOLDER_REBUILD=0 tests/gpu/attention_masks.sh OUT --no-checks)
# Writes OUT_DIR/status.tsv (one line per check), OUT_DIR/bench.tsv (program, shape, behaviour, µs) and
# OUT_DIR/summary.txt; exits 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
deadline=${DEADLINE_S:-540}
left() { echo $(( deadline - ($(date +%s) - start) )); }
out=${1:-build/gpu-attention-masks}
shift || true
bench=1 peers=1 checking=1
for a in "$@"; do
  case $a in --no-bench) bench=0 ;; --no-peers) peers=0 ;; --no-checks) checking=0 ;; esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x build/solder ] || [ "${SOLDER_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOLDER_BUILD_TESTS=OFF > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
  cmake --build build -j "$(nproc)" --target solder > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
fi
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/build/kernel-cache}
echo "== built, $(left) s left"

# The checks: "name label [ENV=VALUE ...] -- solder options", one per line.
checks=$(
  for n in document_mask causal sliding_window prefix_lm; do
    echo "$n tiles -- --small --dim S=256 --dim D=64"
    echo "$n ragged -- --small --dim S=200 --dim D=32"
    echo "$n paper --"
    echo "$n paper-ragged -- --dim S=4000"
    echo "$n rows64-ragged -- --dim S=1000 --dim B=2 --dim H=16"
  done
  echo "document_mask s16k -- --dim S=16384 --dim B=1"
  echo "causal s16k -- --dim S=16384 --dim B=1"
  echo "document_mask paper.lazy SOLDER_TILE_CLASSES=lazy --"
  echo "document_mask s16k.lazy SOLDER_TILE_CLASSES=lazy -- --dim S=16384 --dim B=1"
  for n in causal sliding_window prefix_lm; do echo "$n paper.plain-order SOLDER_GRID_ORDER=plain --"; done
)
# The timings: "name shape behaviour [ENV=VALUE ...] -- solder options".
timings=$(
  for seq in 1024 4096 16384; do
    dims="--dim B=$((16384 / seq)) --dim S=$seq --dim D=64 --dim H=16"
    shape="B$((16384 / seq))_S${seq}_D64"
    echo "document_mask $shape new -- $dims"
    echo "document_mask $shape previous SOLDER_TILE_CLASSES=lazy SOLDER_GRID_ORDER=plain -- $dims"
    for n in causal sliding_window prefix_lm; do
      echo "$n $shape new -- $dims"
      echo "$n $shape previous SOLDER_GRID_ORDER=plain -- $dims"
    done
  done
)

# One line of either list → "ENVS|OPTIONS" pieces (bash arrays do not cross xargs).
split() {  # line → sets name, label, envs (array), opts (array)
  local words=($1)
  name=${words[0]} label=${words[1]}
  local k=2
  [ "${3:-}" = timing ] && { behaviour=${words[2]}; k=3; }
  envs=() opts=()
  while [ $k -lt ${#words[@]} ] && [ "${words[$k]}" != -- ]; do envs+=("${words[$k]}"); k=$((k + 1)); done
  k=$((k + 1))
  while [ $k -lt ${#words[@]} ]; do opts+=("${words[$k]}"); k=$((k + 1)); done
}

compile_one() {  # line [timing]
  split "$1" "" "${2:-}"
  env "${envs[@]}" timeout 600 build/solder bench --compile-only "examples/$name.sol" "${opts[@]}" > /dev/null 2>> "$out/compile.err" ||
    echo "compile failed: $1" >> "$out/compile.err"
}
check_one() {
  split "$1"
  local file="$out/$name.$label.txt"
  env "${envs[@]}" timeout 420 build/solder run --backend cuda "examples/$name.sol" "${opts[@]}" > "$file" 2>&1
  local rc=$?
  local emitted=$(env "${envs[@]}" build/solder emit --cuda "examples/$name.sol" "${opts[@]}" 2>/dev/null | grep '^// tensor-core emitter:')
  local skip=none order=plain
  grep -q 'classified once per block' <<< "$emitted" && skip=table
  grep -q 'classified when the loop reaches it' <<< "$emitted" && skip=lazy
  grep -q 'from its index expressions' <<< "$emitted" && skip=index
  grep -q 'longest rows first' <<< "$emitted" && order=longest-first
  printf '%-15s %-20s rc=%s skip=%-6s order=%-13s %s\n' "$name" "$label" "$rc" "$skip" "$order" \
    "$(grep -Eo 'verified|MISMATCH[^|]*|error[^|]*' "$file" | head -1)"
}
export -f split compile_one check_one
export out

echo "== compile ($(nproc) in parallel), $(left) s left"
: > "$out/compile.err"
[ $checking = 1 ] && echo "$checks" | xargs -d '\n' -P "$(nproc)" -I{} bash -c 'compile_one "$1"' _ {}
[ $bench = 1 ] && echo "$timings" | xargs -d '\n' -P "$(nproc)" -I{} bash -c 'compile_one "$1" timing' _ {}
grep -c 'compile failed' "$out/compile.err" | sed 's/^/   compile failures: /'

failures=0
: > "$out/summary.txt"
if [ $checking = 1 ]; then
  echo "== checks (8 at a time), $(left) s left"
  echo "$checks" | xargs -d '\n' -P 8 -I{} bash -c 'check_one "$1"' _ {} | sort > "$out/status.tsv"
  cat "$out/status.tsv"
  failures=$(grep -Evc 'rc=0 .* ok( |$)' "$out/status.tsv")
  echo "checks: $(wc -l < "$out/status.tsv"), failures: $failures" | tee "$out/summary.txt"
fi

if [ $bench = 1 ]; then
  echo "== timings (one at a time), $(left) s left"
  : > "$out/bench.tsv"
  while IFS= read -r line; do
    if [ "$(left)" -lt 30 ]; then echo "   deadline: stopped before $line" | tee -a "$out/summary.txt"; break; fi
    split "$line" "" timing
    json=$(env "${envs[@]}" timeout 120 build/solder bench "examples/$name.sol" "${opts[@]}" --json 2>> "$out/bench.err")
    us=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["median_us"])' "$json" 2>/dev/null || echo failed)
    printf '%s\t%s\t%s\t%s\n' "$name" "$label" "$behaviour" "$us" | tee -a "$out/bench.tsv"
  done <<< "$timings"
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

if [ $bench = 1 ] && [ $peers = 1 ] && [ "$(left)" -gt 90 ]; then
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    echo "== FlexAttention, $(left) s left"
    timeout $(( $(left) - 10 )) python3 bench/peers.py --suite attention --peers flex --cases "${PEER_CASES:-^document_mask-d64-}" \
      --time-limit $(( $(left) - 60 > 30 ? $(left) - 60 : 30 )) --out "$out/peers-flex.jsonl" > "$out/peers.log" 2>&1
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
echo "== done, $(left) s left"
[ "$failures" = 0 ]
