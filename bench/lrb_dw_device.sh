#!/usr/bin/env bash
# linear_relu_backward on the GPU (issue 15, branch lrb-dw): verified through the CUDA backend (small,
# default, and N 4001: g's grouped rows with a ragged last block), `solder bench` of the suite's two cases (nerf: N 65536, 256 x 256; wide: N 16384,
# 1024 x 1024), an ncu listing of each case's kernels with their times, then the peers in the same call
# (torch eager and torch.compile in its default mode). Solder first. Run from the repository root:
#
#   SOLDER=build/solder [SOLDER_BASE=OTHER_BINARY] SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/gemm/cutlass \
#     bash bench/lrb_dw_device.sh [DEADLINE_S]
#
# SOLDER_BASE (optional): a second solder binary (the tree before the change) benched and profiled beside
# SOLDER on the nerf case, for an A/B in the same call. Results in $OUT/lrb-dw.tgz, with
# a table at the end: pass/fail per verification, µs per case, per kernel (ncu) and per peer.
set -uo pipefail
S=${SOLDER:-build/solder}
BASE=${SOLDER_BASE:-}
deadline=${1:-230}
# Files go to /tmp/lrb-dw-results/lrb-dw and, at the end, into one tarball $OUT/lrb-dw.tgz (a call returns
# at most 8 files).
out=/tmp/lrb-dw-results/lrb-dw
mkdir -p "$out"
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/lrb-dw.tgz" -C /tmp/lrb-dw-results lrb-dw; }
trap pack EXIT
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
export SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-/tmp/lrb-dw-cache}
mkdir -p "$SOLDER_CACHE_DIR"
P=examples/linear_relu_backward.sol
WIDE="--dim N=16384 --dim CI=1024 --dim CO=1024"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

# dw's tile against the cost model's choice (128x64s6k16), nerf case: SOLDER_GEMM_TILE for dw's product only.
DW_TILES=${DW_TILES-"128x128s5k16 64x128s6k16 128x64s6k16c1x2"}
DW_WIDE_TILES=${DW_WIDE_TILES-"128x256s4k4"}  # wide: the model's 7th (128x128s5k2c1x2 chosen)
echo "== 0. compile (NVRTC, in parallel) [$(left) s left]"
for b in "$S" $BASE; do
  timeout 60 "$b" bench $P --compile-only > "$out/compile-$(basename "$b")-nerf.log" 2>&1 &
  timeout 60 "$b" bench $P $WIDE --compile-only > "$out/compile-$(basename "$b")-wide.log" 2>&1 &
done
for t in $DW_TILES; do
  SOLDER_GEMM_TILE="$t@256,256,65536" timeout 60 "$S" bench $P --compile-only > "$out/compile-dw-$t.log" 2>&1 &
done
for t in $DW_WIDE_TILES; do
  SOLDER_GEMM_TILE="$t@1024,1024,16384" timeout 60 "$S" bench $P $WIDE --compile-only > "$out/compile-dw-wide-$t.log" 2>&1 &
done
wait

echo "== 1. verified through the CUDA backend [$(left) s left]"
: > "$out/verify.tsv"
# --dim N=4001: g's grouped rows (8 per block) with a ragged last block, on the register pass.
for args in "--small" "" "--dim N=4001"; do
  timeout 120 "$S" run --backend cuda $P $args > "$out/verify.log" 2>&1
  rc=$?
  printf 'verify %s %s\trc=%s\t%s\n' "$P" "${args:-(default)}" "$rc" "$(tail -n 1 "$out/verify.log")" | tee -a "$out/verify.tsv"
  [ $rc -ne 0 ] && cp "$out/verify.log" "$out/verify-fail$(echo "$args" | tr ' =' '__').log"
done

echo "== 2. solder bench [$(left) s left]"
: > "$out/solder.jsonl"
bench() {  # label binary args...
  local label=$1 bin=$2; shift 2
  local line
  line=$(timeout 90 "$bin" bench $P "$@" --json 2>>"$out/bench.err" | tail -n 1)
  echo "{\"case\": \"$label\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
  echo "$label: $(echo "${line:-null}" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.2f us (min %.2f, max %.2f; floor %.1f us)" % (r["median_us"], r.get("min_us", 0), r.get("max_us", 0), r["floor_us"]))
except Exception as e: print("failed", e)')"
}
bench "solder linear_relu_backward-nerf" "$S"
bench "solder linear_relu_backward-wide" "$S" $WIDE
if [ -n "$BASE" ]; then
  bench "base linear_relu_backward-nerf" "$BASE"
  bench "base linear_relu_backward-wide" "$BASE" $WIDE
fi
for t in $DW_TILES; do
  SOLDER_GEMM_TILE="$t@256,256,65536" bench "solder linear_relu_backward-nerf dw=$t" "$S"
done
for t in $DW_WIDE_TILES; do
  SOLDER_GEMM_TILE="$t@1024,1024,16384" bench "solder linear_relu_backward-wide dw=$t" "$S" $WIDE
done

echo "== 3. kernels and their times (ncu, one call) [$(left) s left]"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
profile() {  # label binary args...
  local label=$1 bin=$2; shift 2
  [ "$(left)" -lt 40 ] && { echo "$label: skipped (time)"; return; }
  timeout 60 ncu --clock-control none --metrics $metrics --csv --page raw -k 'regex:g_kernel|dx_kernel|dw_kernel' -c 6 \
    "$bin" bench $P "$@" --replays 1 --calls-per-replay 1 > "$out/ncu-$label.csv" 2> "$out/ncu-$label.err"
  python3 - "$out/ncu-$label.csv" "$label" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 3:
    print("   %s: no kernels profiled" % sys.argv[2]); sys.exit(0)
head = rows[0]
col = {name: head.index(name) for name in head}
units = dict(zip(head, rows[1])) if rows[1][0] == "" else {}
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
seen = {}
for r in rows[2:] if rows[1][0] == "" else rows[1:]:
    name = r[col["Kernel Name"]].split("(")[0]
    seen.setdefault(name, []).append(r)
for name, rs in seen.items():
    r = rs[-1]  # the last launch of each kernel (the first may see a warm L2)
    t = float(r[col["gpu__time_duration.sum"]].replace(",", "")) * scale.get(units.get("gpu__time_duration.sum", "nsecond"), 1e-3)
    print("   %s %-10s %8.2f us  DRAM %5s %%  SM %5s %%" % (sys.argv[2], name, t, r[col["dram__throughput.avg.pct_of_peak_sustained_elapsed"]],
                                                     r[col["sm__throughput.avg.pct_of_peak_sustained_elapsed"]]))
PY
}
profile solder-nerf "$S"
[ -n "$BASE" ] && profile base-nerf "$BASE"

echo "== 4. peers: torch eager, torch.compile (default mode) [$(left) s left]"
limit=$(( $(left) - 25 ))
if [ $limit -gt 30 ]; then
  PYTHONUNBUFFERED=1 timeout $(( limit + 30 )) python3 bench/peers.py --suite contractions --cases '^linear_relu_backward-(nerf|wide)$' \
    --peers eager,compile --compile-mode default --out "$out/peers.jsonl" --time-limit $limit --no-ceilings > "$out/peers.log" 2>&1
  echo "   rc=$?"
  python3 - "$out/peers.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("record") != "peer": continue
    if r.get("status") != "ok":
        print("peer %-28s %-8s %s %s" % (r["case"], r["peer"], r["status"], str(r.get("error", r.get("note", "")))[:120])); continue
    print("peer %-28s %-8s %8.2f us  rel_err %.2e %s" % (r["case"], r["peer"], r["median_us"], r["rel_err"], "verified" if r["verified"] else "WRONG"))
PY
else
  echo "   skipped: $(left) s left"
fi
echo "== 5. the peer's parts alone (bench/lrb_dw_torch_parts.py) [$(left) s left]"
[ "$(left)" -gt 45 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 "${PARTS:-bench/lrb_dw_torch_parts.py}" 2>&1 | grep -E "^torch part|Error" | tee "$out/torch-parts.txt"

echo "== 6. wide's kernels (ncu) [$(left) s left]"
profile solder-wide "$S" $WIDE
echo "== done after $(( $(date +%s) - start )) s"
