#!/usr/bin/env bash
# evoformer4's one device call (issues 17/15, branch evoformer4): inputs drawn on the GPU, evoformer B32's
# first Solder time, evoformer B1 with free consumers. Run from the root staged by bench/merged_stage.sh
# (build/solder, examples/, bench/, COMMIT), the CuTe headers in ../cutlass:
#   cd .devcarry/evoformer4 && DEADLINE=140 bash bench/attention/evoformer4_call.sh
#
#   0. in the background from the start: every kernel of the call compiled (NVRTC, one per core), and
#      FlexAttention in max-autotune (bench/peers.py) at B1 and B32 D64 (each case's record is written as it
#      finishes; its timeout leaves 60 s), while steps 1-2 use the GPU only for checks, not for timings;
#   1. `solder bench --check-inputs`: the inputs drawn on the GPU against the host generator, byte for byte;
#   2. `solder run --backend cuda` (float64 reference) of evoformer small, B1 (default and free consumers)
#      and B8;
#   3. once Flex is done: `solder bench` of B1 (default and SOLDER_ATTN_FREE=1, two interleaved rounds),
#      B32 D64, B8 D64 (both settings, then with --host-inputs: the previous input path), B8 D128, each
#      with its wall time and its progress lines;
#   4. with time left: ncu of B1's kernel (through `solder run`).
# r.tgz (everything) and summary.txt come back under $OUT; the summary is printed last.
set -uo pipefail
O=${OUT:-/tmp/out}; R=$O/r; mkdir -p "$R"
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT 2>/dev/null)
start=$(date +%s); left() { echo $(( ${DEADLINE:-140} - ($(date +%s) - start) )); }
S=build/solder; E=examples/evoformer.sol
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$R/device.txt"
dims() { echo "--dim B=$1 --dim S1=256 --dim S2=256 --dim H=4 --dim D=$2"; }

# ---- 0. background: compiles, then Flex
{
  for bd in "1 64" "8 64" "32 64" "8 128"; do echo "$S bench --compile-only $E $(dims $bd)"; done
  for bd in "1 64" "8 64"; do echo "SOLDER_ATTN_FREE=1 $S bench --compile-only $E $(dims $bd)"; done
  echo "$S bench --compile-only $E --small"
} | xargs -d '\n' -P "$(nproc)" -I{} sh -c '{}' > "$R/compile.log" 2>&1 &
compile_pid=$!
PYTHONUNBUFFERED=1 timeout $(( ${DEADLINE:-140} - 60 )) python3 bench/peers.py --no-ceilings --out "$R/peers.jsonl" \
  --suite attention --cases '^evoformer-b(1|32)-d64$' --peers flex > "$R/peers.log" 2>&1 < /dev/null &
flex_pid=$!

# ---- 1. inputs drawn on the GPU against the host's
echo "== 1. --check-inputs ($(left) s left)"
for a in "$E --small" "$E $(dims 1 64)" "examples/document_mask.sol --small"; do
  timeout 30 $S bench --check-inputs $a > "$R/check.log" 2>&1; rc=$?
  echo "   rc $rc: $a" | tee -a "$R/check-inputs.txt"; sed 's/^/      /' "$R/check.log" | tee -a "$R/check-inputs.txt"
done
wait "$compile_pid"
echo "== compiled at $(( $(date +%s) - start )) s; errors: $(grep -ci error "$R/compile.log")"

# ---- 2. verification (float64 reference)
echo "== 2. solder run --backend cuda ($(left) s left)"
: > "$R/verify.txt"
for a in "-|$E --small" "-|$E $(dims 1 64)" "SOLDER_ATTN_FREE=1|$E $(dims 1 64)" "-|$E $(dims 8 64)"; do
  env=${a%%|*}; args=${a#*|}; [ "$(left)" -lt 85 ] && { echo "   deadline before verify $args"; break; }
  if [ "$env" = - ]; then timeout 40 $S run --backend cuda $args > "$R/verify.log" 2>&1; rc=$?
  else env "$env" timeout 40 $S run --backend cuda $args > "$R/verify.log" 2>&1; rc=$?; fi
  printf '%s\t%s\trc %s\t%s\n' "$env" "$args" "$rc" "$(grep -iE "error|verified|mismatch" "$R/verify.log" | tail -n 2 | tr '\n' ' ' | cut -c1-200)" | tee -a "$R/verify.txt"
done

# ---- 3. timings, after Flex (its autotune times on the GPU; its own timeout ends it with 60 s left)
wait "$flex_pid"; echo "   flex rc $? at $(( $(date +%s) - start )) s" | tee -a "$R/peers.log"
echo "== 3. solder bench ($(left) s left; flex: $(grep -c '"peer"' "$R/peers.jsonl" 2>/dev/null) records)"
: > "$R/solder.jsonl"
bench() {  # TAG ENV ARGS...
  local tag=$1 env=$2; shift 2
  [ "$(left)" -lt 12 ] && { echo "   deadline before $tag"; return; }
  local t0=$EPOCHREALTIME line
  if [ "$env" = - ]; then line=$(timeout 40 $S bench "$@" --json 2> "$R/bench-$tag.err" | tail -n 1)
  else line=$(env "$env" timeout 40 $S bench "$@" --json 2> "$R/bench-$tag.err" | tail -n 1); fi
  local wall; wall=$(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")
  echo "{\"tag\": \"$tag\", \"env\": \"$env\", \"wall_s\": $wall, \"result\": ${line:-null}}" >> "$R/solder.jsonl"
  printf '   %-16s %-18s %8s us  wall %5s s\n' "$tag" "$env" "$(echo "${line:-null}" | python3 -c 'import json,sys
try: print("%.1f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")')" "$wall"
}
bench b1-r1 - $E $(dims 1 64)
bench b1-free-r1 SOLDER_ATTN_FREE=1 $E $(dims 1 64)
bench b32 - $E $(dims 32 64)
bench b1-r2 - $E $(dims 1 64)
bench b1-free-r2 SOLDER_ATTN_FREE=1 $E $(dims 1 64)
bench b8 - $E $(dims 8 64)
bench b8-free SOLDER_ATTN_FREE=1 $E $(dims 8 64)
bench b8-host - $E $(dims 8 64) --host-inputs
bench b8-d128 - $E $(dims 8 128)

# ---- 4. optional
NCU_BIN=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$(left)" -gt 25 ] && [ -n "$NCU_BIN" ]; then
  echo "== 4. ncu of B1's kernel ($(left) s left)"
  timeout $(( $(left) - 3 )) "$NCU_BIN" --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy $S run --backend cuda $E $(dims 1 64) > "$R/ncu-b1.txt" 2>&1
  grep -E "Duration|Throughput|Issued Warp|Issue Slots|No Eligible|Active Warps|Eligible Warps|Stall|Registers|Grid Size|Achieved Occ|L2 Hit|Mem Busy|Max Bandwidth" "$R/ncu-b1.txt" | head -30
fi

# ---- summary
python3 - "$R" > "$R/summary.txt" <<'PY'
import json, sys, statistics
r = sys.argv[1]
sol = {}
for line in open(f"{r}/solder.jsonl"):
    x = json.loads(line)
    sol[x["tag"]] = x
flex = {}
try:
    for line in open(f"{r}/peers.jsonl"):
        x = json.loads(line)
        if x.get("peer") == "flex" and x.get("median_us"):
            flex[x["case"]] = x["median_us"]
except FileNotFoundError:
    pass
def us(tag):
    x = sol.get(tag)
    return x["result"]["median_us"] if x and x.get("result") else None
print("| cell | setting | Solder µs | wall s | Flex max-autotune µs | ratio |")
print("|---|---|---|---|---|---|")
for tag, case in [("b1-r1", "evoformer-b1-d64"), ("b1-r2", "evoformer-b1-d64"), ("b1-free-r1", "evoformer-b1-d64"),
                  ("b1-free-r2", "evoformer-b1-d64"), ("b8", "evoformer-b8-d64"), ("b8-free", "evoformer-b8-d64"),
                  ("b8-host", "evoformer-b8-d64"), ("b32", "evoformer-b32-d64"), ("b32-host", "evoformer-b32-d64"),
                  ("b8-d128", "evoformer-b8-d128")]:
    t, f = us(tag), flex.get(case)
    wall = sol.get(tag, {}).get("wall_s")
    print(f"| {case} | {tag} {sol.get(tag, {}).get('env', '')} | {t if t is None else f'{t:.1f}'} | {wall} | "
          f"{f if f is None else f'{f:.1f}'} | {'' if not (t and f) else f'{t / f:.3f}'} |")
PY
cp "$R/summary.txt" "$O/summary.txt"
tar czf "$O/r.tgz" -C "$O" r
cat "$R/check-inputs.txt" "$R/verify.txt" 2>/dev/null | tail -n 20
cat "$O/summary.txt"
echo "== done ($(left) s left)"
