#!/usr/bin/env bash
# One device call for issue 15, branch lrb4 (bench/NOTES.md, "lrb4"): linear_relu_backward's last missed
# cell against torch.compile (default mode) in the same call. Most important first, each part written
# under /tmp/lrb4 and packed into $OUT/lrb4.tgz as it finishes:
#   0. the GPU's clocks, power and throttle reasons every 100 ms (clocks.csv);
#   1. every NVRTC kernel of the call compiled in parallel (all of them in the carried cache);
#   2. `solder run --backend cuda` (float64 reference) of every variant the rounds time: lrb nerf on the
#      planner's tiles and on dw 64x64 s9 k8 c2x1 + dx 128x256 s4 (with and without SOLDER_PDL=all, and
#      dw at 8 / 12 stages), wide, nerf_mlp on dx's forms; in parallel, while rounds.py compiles the peers;
#   3. rounds.py (ROUNDS_PLAN=lrb4): lrb nerf (four rounds) and wide (two), Solder's variants and
#      torch.compile interleaved; torch.profiler's listing of the peer's lrb kernels; then one round of g,
#      dx and dw alone (bench/programs/lrb_*.sol) on the forms the refit candidates rank first, and nerf_mlp
#      on dx's forms with its peer, as far as the deadline allows;
#   4. ncu (a few sections, --launch-count 1 each) of the g kernel inside Solder's nerf program and of
#      Inductor's where() kernel (bench/lrb_dw_torch_parts.py), if time is left;
#   5. the summary table (summary.txt), printed last.
# Run from the carry folder (payload.tgz: stripped solder, libgomp, tree/ with this branch's device
# headers, examples/ and bench/ python files and programs, cache/):
#   cd .devcarry/lrb4 && DEADLINE=140 bash device.sh
# bench/lrb4/stage.sh builds the carry folder on the build machine.
set -uo pipefail
export ROUNDS_PLAN=lrb4  # bench/quant_lrb/rounds.py's cells for this call
HERE=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" != --list-compile ] && [ -f "$HERE/payload.tgz" ] && tar xzf "$HERE/payload.tgz" -C "$HERE"  # solder, libgomp, tree/, cache/
R=${TREE:-$HERE/tree}
LRB=$R/examples/linear_relu_backward.sol
NM=$R/examples/nerf_mlp.sol
QG=$R/examples/quant_gemm.sol
DW=256,256,65536
DX=65536,256,256
# label | env | `solder run --backend cuda` arguments.
VERIFY="lrb.nerf||$LRB
lrb.nerf.dw_dx|SOLDER_GEMM_TILE=64x64s9k8c2x1@$DW;128x256s4k1@$DX|$LRB
lrb.nerf.dw_dx_pdl|SOLDER_GEMM_TILE=64x64s9k8c2x1@$DW;128x256s4k1@$DX SOLDER_PDL=all|$LRB
lrb.nerf.dw12_dx|SOLDER_GEMM_TILE=64x64s12k8c2x1@$DW;128x256s4k1@$DX|$LRB
lrb.nerf.dw8_dx|SOLDER_GEMM_TILE=64x64s8k8c2x1@$DW;128x256s4k1@$DX|$LRB
lrb.wide||$LRB --dim N=16384 --dim CI=1024 --dim CO=1024
lrb.small.pdl|SOLDER_PDL=all|$LRB --small
nerf_mlp||$NM
nerf_mlp.128x256|SOLDER_GEMM_TILE=128x256s4k1@$DX|$NM
nerf_mlp.128x128s5|SOLDER_GEMM_TILE=128x128s5k1@$DX|$NM"
# sh -c command lines: each ENV word quoted (SOLDER_GEMM_TILE's entries are ';'-separated).
quoted() { local w; for w in $1; do printf '%q ' "$w"; done; }
compile_commands() {  # SOLDER: every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  echo "$VERIFY" | while IFS='|' read -r label env args; do echo "env $(quoted "$env")timeout 100 $1 bench $args --compile-only"; done
  python3 "$HERE/rounds.py" --list "$R" | while IFS='|' read -r env args; do echo "env $(quoted "$env")timeout 100 $1 bench $args --compile-only"; done
}
if [ "${1:-}" = --list-compile ]; then compile_commands "$2"; exit 0; fi  # stage.sh: the build machine's precompile

O=${OUT:-/tmp/out}; out=/tmp/lrb4; rm -rf "$out"; mkdir -p "$out" "$O"
start=$(date +%s); DEADLINE=${DEADLINE:-140}; left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
pack() { tar czf "$O/lrb4.tgz" -C /tmp lrb4 2>/dev/null; }
cd "$HERE" && chmod +x solder 2>/dev/null
export LD_LIBRARY_PATH=$HERE:${LD_LIBRARY_PATH:-} SOLDER_CACHE_DIR=$HERE/cache SOLDER_SOURCE_DIR=$HERE/tree
# The CuTe headers through one fixed path, the one stage.sh compiled the carried cache with (the include
# path is part of the cache key).
ln -sfn "$(cd "${SOLDER_CUTLASS_INCLUDE:-$HERE/../cutlass}" && pwd)" /tmp/solder-lrb4-cutlass
export SOLDER_CUTLASS_INCLUDE=/tmp/solder-lrb4-cutlass SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
export PYTHONPATH=$R/bench${PYTHONPATH:+:$PYTHONPATH}
S=$HERE/solder
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); uname -m $(uname -m); start $(date -u +%FT%TZ)" | tee -a "$out/device.txt"

echo "== 0. clock log (100 ms)"
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader > /dev/null 2>&1 || fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
clock_pid=$!

echo "== 1. compile (NVRTC, in parallel; all in the carried cache) ($(left) s left)"
compile_commands "$S" | timeout 25 xargs -d "\n" -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compiled $(grep -c 'compiled in' "$out/compile.log"), cached $(grep -c 'already in' "$out/compile.log"); errors: $(grep -ci 'error' "$out/compile.log")"

echo "== 2. verify: solder run --backend cuda against float64; peers compile meanwhile ($(left) s left)"
rm -f /tmp/lrb4-go
PYTHONUNBUFFERED=1 python3 "$HERE/rounds.py" --solder "$S" --tree "$R" --out "$out" --go /tmp/lrb4-go \
  --deadline $(( start + DEADLINE - 12 )) --compile-by $(( start + 60 )) \
  > "$out/rounds.txt" 2>&1 &
rounds_pid=$!
echo "$VERIFY" > "$out/verify-list.txt"
export S out
verify_one() {  # one line of VERIFY
  local label env args
  IFS='|' read -r label env args <<< "$1"
  if env $env timeout 30 "$S" run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr '\n' ' ')"; fi
}
export -f verify_one
timeout 34 xargs -d '\n' -P 8 -n 1 bash -c 'verify_one "$1"' _ < "$out/verify-list.txt" > "$out/verify.txt"
sort "$out/verify.txt" | sed 's/^/   /'
echo "   verified $(grep -c ': verified' "$out/verify.txt") of $(wc -l < "$out/verify-list.txt") ($(left) s left)"
pack
touch /tmp/lrb4-go

echo "== 3. rounds: Solder and torch.compile interleaved ($(left) s left)"
while kill -0 "$rounds_pid" 2>/dev/null && [ "$(left)" -gt 10 ]; do sleep 1; done
kill "$rounds_pid" 2>/dev/null
grep -E "^(peer|kernels|torch part)" "$out/rounds.txt" | sed 's/^/   /' | cut -c1-220
pack

echo "== 4. ncu of the g kernel (Solder's, in the nerf program) and of Inductor's where(), if time is left ($(left) s left)"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
if [ "$(left)" -gt 14 ]; then
  SOLDER_GEMM_TILE="64x64s9k8c2x1@$DW;128x256s4k1@$DX" timeout $(( $(left) - 6 )) ncu --clock-control none --launch-skip 3 \
    --launch-count 3 $SECTIONS "$S" bench "$LRB" --replays 2 --calls-per-replay 1 > "$out/ncu-solder-nerf.txt" 2>&1
  echo "   ncu solder nerf rc $? ($(left) s left)"
else echo "   deadline: ncu of Solder's nerf skipped"; fi
pack
if [ "$(left)" -gt 14 ]; then
  timeout $(( $(left) - 6 )) ncu --clock-control none -k regex:triton --launch-count 1 $SECTIONS \
    python3 "$R/bench/lrb_dw_torch_parts.py" > "$out/ncu-torch-g.txt" 2>&1
  echo "   ncu torch where() rc $? ($(left) s left)"
else echo "   deadline: ncu of Inductor's where() skipped"; fi
kill "$clock_pid" 2>/dev/null

echo "== 5. summary ($(left) s left)"
python3 "$HERE/summary.py" "$out" lrb4 > "$out/summary.txt" 2>&1
pack
cat "$out/summary.txt"
