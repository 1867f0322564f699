#!/usr/bin/env bash
# An integrator's merged-tree call, run on the device from a mini repository root carried there
# (build/solder and bin/test_sm90_* built on the build machine, examples/, bench/, tests/gpu/, COMMIT),
# with the CuTe headers in ../cutlass:
#   cd <root> && DEADLINE=440 SPOTS=bench/merged_s11.spots bash bench/merged_call.sh
#
#   1. device tests: DEVICE_TESTS, "name:seconds[:arg]" words, each running bin/test_sm90_<name> 2026 [arg]
#      (unset: all five, no argument; DEVICE_TESTS="" runs none), every output line stamped with its
#      second since the start;
#   2. tests/gpu/run.sh (RUN_SH=0 skips it): every example at small and paper sizes through --backend cuda
#      against the float64 reference;
#   2b. VERIFY (a regular expression on bench/suites.py case ids; unset: none): `solder run --backend cuda` of
#      each such case at its suite size against the float64 reference, 4 at a time, into r/verify.txt;
#   3. the spot checks in the SPOTS file, one per line, fields separated by blanks ("-" for none):
#        TAG SUITE CASES PEERS PEER-SECONDS [ENV=V ...]
#      Solder's records go to r/solder.jsonl (TAG "-") or r/solder-TAG.jsonl, with the ENV words (knobs
#      such as SOLDER_GEMM_TILE=...) prefixed to the line's solder commands; then the lines' PEERS
#      (comma-separated names of bench/peers.py), measured in this call into r/peers.jsonl; PEER_ARGS adds
#      arguments to every peers.py call (e.g. --compile-mode default). Every solder kernel of the
#      spots compiles in parallel while the device tests run. A spot starts only with 60 s left.
#   4. the table (bench/merged_table.py) into r/summary.md; r.tgz and run.tgz come back under $OUT.
set -uo pipefail
O=${OUT:-/tmp/out}; mkdir -p $O/r
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT)
start=$(date +%s); left() { echo $(( ${DEADLINE:-440} - ($(date +%s) - start) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
SPOTS=${SPOTS:?SPOTS names the spot-check file}
spots() { grep -v '^\s*\(#\|$\)' "$SPOTS"; }

# solder_cmds ARGS...: every spot's solder command lines, each prefixed with its ENV words
solder_cmds() {
  spots | while read -r tag suite cases peers plimit envs; do
    out=$O/r/solder-$tag.jsonl; [ "$tag" = "-" ] && out=$O/r/solder.jsonl
    python3 bench/suites.py --suite "$suite" --cases "$cases" --solder-commands "$@" --out "$out" 2>/dev/null |
      sed "s|^|${envs:+$envs }|"
  done
}
solder_cmds --compile-only --timeout 120 | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &

echo "== 1. device tests"
for t in ${DEVICE_TESTS-attention:110 attention_dual:40 gemm:150 gemm_rows:40 gemm_prologue:60}; do
  IFS=: read -r n s arg <<< "$t"; f=$n${arg:+-$arg}
  # each line stamped with the seconds since the test started (stdout line-buffered), so slow cases show
  t0=$EPOCHREALTIME
  timeout $s stdbuf -oL bin/test_sm90_$n 2026 $arg 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done |
    awk -v t0="$t0" '{ t = $1; sub(/^[^ ]* /, ""); printf "%7.2f %s\n", t - t0, $0 }' > $O/r/dt-$f.txt
  rc=${PIPESTATUS[0]}
  echo "   $f rc $rc $(tail -n1 $O/r/dt-$f.txt) ($(( $(date +%s) - start )) s)"
done
grep -h "^ *[0-9.]* FAIL" $O/r/dt-*.txt | head -5
if [ "${RUN_SH:-1}" = 1 ]; then
  echo "== 2. tests/gpu/run.sh ($(left) s left)"
  SOLDER_REBUILD=0 SOLDER_GPU_PARALLEL=8 timeout $(( $(left) - ${SPOT_SECONDS:-250} )) bash tests/gpu/run.sh $O/run \
    > $O/r/run-summary.txt 2>&1
  echo "   rc $?"; grep -E "MISMATCH|ERROR" $O/r/run-summary.txt | head; tail -n1 $O/r/run-summary.txt
fi
if [ -n "${VERIFY:-}" ]; then
  echo "== 2b. verify at the suites' sizes ($(left) s left)"
  python3 bench/suites.py --suite all --cases "$VERIFY" --verify-commands --timeout 120 |
    xargs -d '\n' -P 4 -I{} sh -c '{} > /dev/null 2>&1 && echo "verified {}" || echo "FAILED ($?) {}"' > $O/r/verify.txt
  echo "   $(grep -c ^verified $O/r/verify.txt) of $(wc -l < $O/r/verify.txt) verified"; grep ^FAILED $O/r/verify.txt | head
fi
wait

echo "== 3. spot checks ($(left) s left)"
solder_cmds --timeout 30 > $O/r/cmds.txt
while IFS= read -r line; do
  [ "$(left)" -lt 60 ] && { echo "   deadline before: $line"; break; }
  sh -c "$line" 2>> $O/r/solder.err < /dev/null
done < $O/r/cmds.txt
echo "   solder records $(cat $O/r/solder*.jsonl 2>/dev/null | wc -l) of $(wc -l < $O/r/cmds.txt)"
spots | while read -r tag suite cases peers plimit envs; do
  [ "$peers" = "-" ] && continue
  [ "$(left)" -lt 30 ] && { echo "   deadline before peers: $suite $cases"; break; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 5 )) python3 bench/peers.py --no-ceilings --out $O/r/peers.jsonl \
    --suite "$suite" --cases "$cases" --peers "$peers" --time-limit "$plimit" ${PEER_ARGS:-} >> $O/r/peers.log 2>&1 < /dev/null
  echo "   peers $suite $cases $peers rc $? ($(left) s left)"
done

python3 bench/merged_table.py $O/r | tee $O/r/summary.md
tar czf $O/run.tgz -C $O run 2>/dev/null; tar czf $O/r.tgz -C $O r
echo "== done ($(left) s left)"
