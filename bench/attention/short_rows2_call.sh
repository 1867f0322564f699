#!/usr/bin/env bash
# One device call for vanilla / gqa hd64 S 1k against cuDNN SDPA (issue 17, branch short-rows2): the
# staggered 6-stage default against the staged epilogue in the Q rows (Config::QRowsEpilogue, 6 stages)
# and in a buffer of its own (5 stages), by the emitter's knobs (bench/attention/short_rows2.settings).
#   0. the attention skeleton's device test (bin/test_sm90_attention): the "Qr" cases (every QRowsEpilogue
#      Config, bit for bit against the per-pair stores), then a short sample of the rest, every output
#      line stamped with its second since the test started, each under `timeout` (a protocol change:
#      a hang shows as the last stamped line);
#   1. `solder run --backend cuda` (float64 reference, sampled) of vanilla / gqa with the Q-rows epilogue
#      at small and paper sizes and on fewer / more work tiles per block, 4 at a time;
#   2. rounds (bench/attention/short_rows2_rounds.py, one Python process): per round every setting on both
#      cells by `solder bench` (odd rounds in the settings' order, even rounds reversed), then cuDNN SDPA
#      (bench/peers.py's sdpa_cudnn, CUDA graphs, median) on both cells, while DEADLINE allows;
#   3. the table (bench/attention/short_rows2_table.py) into summary.md;
#   4. one ncu of the Q-rows kernel on vanilla S 1k if it misses cuDNN and time is left.
# (NVRTC's cache key holds the CuTe include path: cubins staged here hit only where the staged root has the
# same absolute path on the device; otherwise step 0's parallel compile builds them, ≈ 12 s each.)
# Staged by bench/attention/short_rows2_stage.sh; run on the device from the staged root:
#   cd .devcarry/short-rows2 && DEADLINE=140 bash bench/attention/short_rows2_call.sh
# `short_rows2_call.sh --commands` prints the solder bench commands of every kernel the call runs (the
# stage script compiles them). Working files in /tmp/sr2/r, tarred into $OUT/r.tgz after every step.
set -uo pipefail
SETTINGS=${SETTINGS:-bench/attention/short_rows2.settings}
settings() { grep -v '^\s*\(#\|$\)' "$SETTINGS"; }
envs_of() { [ "$1" = "-" ] && echo "" || echo "$1"; }
dims="--dim B=16 --dim S=1024 --dim D=64 --dim H=16"
# verification runs: TAG EXAMPLE DIMS ("small": --small)
verify_runs() {
  for ex in vanilla gqa; do
    echo "qr $ex $dims"
    echo "qr $ex small"
  done
  # (S 1000 does not take the skeleton in `solder run`: the device test's cases cover ragged rows) few
  # work tiles (one per block), four per block, GQA, 4 key tiles per work tile; the default as a control
  echo "qr vanilla --dim B=2 --dim H=3 --dim S=1024 --dim D=64"
  echo "qr vanilla --dim B=4 --dim H=16 --dim S=1024 --dim D=64"
  echo "qr gqa --dim B=2 --dim H=4 --dim S=1024 --dim D=64"
  echo "qr vanilla --dim B=8 --dim H=16 --dim S=512 --dim D=64"
  echo "def vanilla --dim B=2 --dim H=3 --dim S=1024 --dim D=64"
}
env_of_tag() { settings | awk -v t="$1" '$1 == t { $1 = ""; print }' | sed 's/^ *//; s/^-$//'; }
dims_of() { [ "$1" = small ] && echo "--small" || echo "$*"; }
if [ "${1:-}" = --commands ]; then
  settings | while read -r tag envs; do
    for ex in vanilla gqa; do echo "env $(envs_of "$envs") build/solder bench examples/$ex.sol $dims"; done
  done
  verify_runs | while read -r tag ex rest; do echo "env $(env_of_tag $tag) build/solder bench examples/$ex.sol $(dims_of $rest)"; done
  exit 0
fi

O=/tmp/sr2; rm -rf $O; mkdir -p $O/r/v ${OUT:-/tmp/out}
ck() { tar czf ${OUT:-/tmp/out}/r.tgz -C $O r; }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-140} - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $O/r/device.txt
# (any kernel the stage did not compile: NVRTC, in parallel, while the device tests run)
bash "$0" --commands | sed 's/$/ --compile-only/' | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &

stamp "== 0. device tests"
# FILTER:SECONDS words; the Q-rows cases first
for t in ${DEVICE_TESTS:-"Qr:45" "d64 s6 P Q2 St2 many:10" "d64 s4 P Q2 Dy Fr Ep Pw dyn plain:8" "EpQ:10"}; do
  f=${t%:*}; s=${t##*:}; n=$(echo "$f" | tr ' ' '_')
  t0=$EPOCHREALTIME
  timeout $s stdbuf -oL bin/test_sm90_attention 2026 "$f" 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done |
    awk -v t0="$t0" '{ t = $1; sub(/^[^ ]* /, ""); printf "%7.2f %s\n", t - t0, $0 }' > $O/r/dt-$n.txt
  rc=${PIPESTATUS[0]}
  stamp "   '$f' rc $rc: $(tail -n1 $O/r/dt-$n.txt)"
done
grep -h "FAIL" $O/r/dt-*.txt | head -5; ck
wait
stamp "compiled: $(grep -c 'compiled in' $O/r/compile.log) new, $(grep -c 'already in' $O/r/compile.log) cached"

stamp "== 1. solder run --backend cuda ($(left) s left)"
i=0
verify_runs | while read -r tag ex rest; do
  echo "$tag env $(env_of_tag $tag) timeout 60 build/solder run --backend cuda examples/$ex.sol $(dims_of $rest)"
done > $O/r/verify-cmds.txt
while read -r tag cmd; do
  i=$((i + 1))
  ( sh -c "$cmd" > $O/r/v/$i-$tag.log 2>&1 && echo "verified $tag $cmd" || echo "FAILED ($?) $tag $cmd" ) >> $O/r/verify.txt < /dev/null &
  [ "$(jobs -rp | wc -l)" -ge 4 ] && wait -n
done < $O/r/verify-cmds.txt
wait
stamp "   $(grep -c ^verified $O/r/verify.txt) of $(wc -l < $O/r/verify.txt) verified"; grep ^FAILED $O/r/verify.txt | head; ck

stamp "== 2. rounds ($(left) s left)"
PYTHONUNBUFFERED=1 timeout $(( $(left) > 20 ? $(left) - 10 : 10 )) python3 bench/attention/short_rows2_rounds.py --settings "$SETTINGS" --dir $O/r \
  --stop-at $(( start + ${DEADLINE:-140} - ${NCU_SECONDS:-22} )) --rounds ${ROUNDS:-6} $dims 2>&1 | tee $O/r/rounds.log
stamp "   rounds done ($(left) s left)"; ck
python3 bench/attention/short_rows2_table.py $O/r > $O/r/summary.md 2>&1; ck

if grep -q '^| vanilla | qr .*MISSED' $O/r/summary.md && [ "$(left)" -gt 15 ]; then
  stamp "== 4. ncu of vanilla S 1k, qr ($(left) s left)"
  SOLDER_ATTN_EPIQ=1 timeout $(( $(left) - 3 )) ncu --kernel-name regex:fused --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis build/solder bench examples/vanilla.sol $dims --replays 1 > $O/r/ncu-vanilla-qr.txt 2>&1
  stamp "   ncu rc $?"; ck
fi
cp $O/r/summary.md ${OUT:-/tmp/out}/summary.md; cat $O/r/summary.md
stamp "== done ($(left) s left)"
