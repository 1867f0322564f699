#!/usr/bin/env bash
# One device call for vanilla / gqa hd64 S 1k against cuDNN SDPA (issue 17, branch short-rows): the
# staggered 6-stage default against causal S 1k's schedule and its parts, by the emitter's knobs.
#   0. the attention skeleton's device test (prebuilt bin/test_sm90_attention), filtered on the Configs
#      the settings below emit (each already a case: "dyn plain" = no mask, GQA, ragged S 1000);
#   1. `solder run --backend cuda` (float64 reference, sampled) of vanilla and gqa at S 1k for every
#      setting, and at --small for the non-default ones, 4 at a time;
#   2. `solder bench` rounds: round 1 in SETTINGS order, cuDNN SDPA (bench/peers.py, CUDA graphs,
#      median) right after it, then rounds 2, 3 ... in reversed / forward order while DEADLINE allows;
#   3. the table (bench/attention/short_rows_table.py) into r/summary.md.
# Staged by bench/attention/short_rows_stage.sh; run on the device from the staged root:
#   cd .devcarry/short-rows && DEADLINE=150 bash bench/attention/short_rows_call.sh
# Every kernel is compiled first (carried in .cache/kernels when staged; else NVRTC, all in parallel).
# Working files in /tmp/sr/r, tarred into $OUT/r.tgz after every step (files back from $OUT are few).
set -uo pipefail
O=/tmp/sr; rm -rf $O; mkdir -p $O/r/v ${OUT:-/tmp/out}
ck() { tar czf ${OUT:-/tmp/out}/r.tgz -C $O r; }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $O/r/device.txt
dims="--dim B=16 --dim S=1024 --dim D=64 --dim H=16"
# TAG ENV... ("-": none); at most 4 settings, each Config covered by the device test
SETTINGS=${SETTINGS:-bench/attention/short_rows.settings}
settings() { grep -v '^\s*\(#\|$\)' "$SETTINGS"; }
envs_of() { [ "$1" = "-" ] && echo "" || echo "$1"; }

settings | while read -r tag envs; do
  for ex in vanilla gqa; do echo "env $(envs_of "$envs") build/solder bench examples/$ex.sol $dims --compile-only"; done
done | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &

stamp "== 0. device tests"
# (every case of these Configs passed in the thirteenth session's merged call 1 with this binary's source;
# here the unmasked GQA cases on 0 / 1 / 3 / 7 persistent blocks, and the default's many-tiles cases)
for f in "d64 s4 P Q2 Dy Fr Ep Pw dyn plain" "d64 s4 P Q2 Dy Ep Vr dyn plain" "d64 s5 P Q2 Fr Ep Vr dyn plain" "d64 s6 P Q2 St2 many"; do
  n=$(echo "$f" | tr ' ' '_')
  timeout 20 bin/test_sm90_attention 2026 "$f" > $O/r/dt-$n.txt 2>&1
  echo "   '$f' rc $? ok $(grep -c ' OK' $O/r/dt-$n.txt) fail $(grep -c FAIL $O/r/dt-$n.txt): $(tail -n1 $O/r/dt-$n.txt)"
done
grep -h FAIL $O/r/dt-*.txt | head -5; ck
wait
stamp "compiled: $(grep -c 'compiled in' $O/r/compile.log) new, $(grep -c 'already in' $O/r/compile.log) cached"

stamp "== 1. solder run --backend cuda ($(left) s left)"
settings | while read -r tag envs; do
  for ex in vanilla gqa; do
    echo "$tag env $(envs_of "$envs") timeout 90 build/solder run --backend cuda examples/$ex.sol $dims"
    [ "$tag" != def ] && echo "$tag env $(envs_of "$envs") timeout 90 build/solder run --backend cuda examples/$ex.sol --small"
  done
done > $O/r/verify-cmds.txt
i=0
while read -r tag cmd; do
  i=$((i + 1))
  ( sh -c "$cmd" > $O/r/v/$i-$tag.log 2>&1 && echo "verified $tag $cmd" || echo "FAILED ($?) $tag $cmd" ) >> $O/r/verify.txt < /dev/null &
  [ "$(jobs -rp | wc -l)" -ge 4 ] && wait -n
done < $O/r/verify-cmds.txt
wait
echo "   $(grep -c ^verified $O/r/verify.txt) of $(wc -l < $O/r/verify.txt) verified"; grep ^FAILED $O/r/verify.txt | head; ck

bench_round() {  # $1: round, $2: order (fwd|rev)
  local r=$1
  for ex in vanilla gqa; do
    if [ "$2" = rev ]; then settings | tac; else settings; fi | while read -r tag envs; do
      [ "$(left)" -lt 12 ] && { echo "   deadline before round $r $ex $tag"; break; }
      env $(envs_of "$envs") timeout 30 build/solder bench examples/$ex.sol $dims --json 2>> $O/r/solder.err < /dev/null |
        sed "s/^{/{\"tag\":\"$tag\",\"round\":$r,/" >> $O/r/solder.jsonl
    done
  done
  stamp "   round $r: $(grep -c "\"round\":$r," $O/r/solder.jsonl) records ($(left) s left)"; ck
}
stamp "== 2. timings ($(left) s left)"
bench_round 1 fwd
PYTHONUNBUFFERED=1 timeout $(( $(left) > 40 ? 35 : $(left) - 5 )) python3 bench/peers.py --no-ceilings --out $O/r/peers.jsonl \
  --suite attention --cases '^(vanilla|gqa)-d64-s1024$' --peers sdpa_cudnn --time-limit 25 > $O/r/peers.log 2>&1 < /dev/null
stamp "   peers rc $? ($(left) s left)"; ck
r=2
while [ "$(left)" -gt 35 ] && [ $r -le 4 ]; do
  bench_round $r $([ $((r % 2)) = 0 ] && echo rev || echo fwd); r=$((r + 1))
done
python3 bench/attention/short_rows_table.py $O/r > $O/r/summary.md 2>&1; ck
cp $O/r/summary.md ${OUT:-/tmp/out}/summary.md; cat $O/r/summary.md
stamp "== done ($(left) s left)"
