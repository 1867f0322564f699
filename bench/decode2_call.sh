#!/usr/bin/env bash
# The fifteenth session's decode call (issue 17/15, branch decode2), run on the device from the root that
# bench/merged_stage.sh stages (build/solder, examples/, bench/; the CuTe headers in ../cutlass):
#   cd .devcarry/decode2 && DEADLINE=125 bash bench/decode2_call.sh
#   1. `solder run --backend cuda` against the float64 reference, 8 at a time: llama_decode small, paper (KV 1k),
#      KV 4k, KV 16k; mla_decode and paged_decode small and paper (the GEMV stream, the default plan);
#   2. the spots of bench/decode2.spots, as bench/merged_call.sh runs them (its step 3 with shorter guards;
#      every kernel compiled in parallel while step 1 runs): `solder bench` of llama_decode KV 1k / 4k / 16k
#      on the GEMV stream and with SOLDER_GEMV=0 (the fused plan), then the suite's peers (torch.compile,
#      eager, eager + SDPA) in the same call; bench/merged_table.py's table;
#   3. ncu, time permitting: each kernel of one llama_decode step, its duration and DRAM throughput (clocks
#      not locked, caches flushed between kernels): KV 1k on the GEMV stream, KV 1k fused (SOLDER_GEMV=0),
#      KV 16k on the GEMV stream.
#   Everything goes to /tmp/decode2/r; $OUT gets r.tgz (all of it), summary.md, verify.txt and the ncu tables
#   (at most 8 files come back).
set -uo pipefail
FINAL=${OUT:-/tmp/out}; O=/tmp/decode2; mkdir -p $O/r $FINAL; export OUT=$O
finish() { tar czf $FINAL/r.tgz -C $O r; cp $O/r/summary.md $O/r/verify.txt $FINAL/ 2>/dev/null; cp $O/r/ncu-*.txt $FINAL/ 2>/dev/null; }
trap finish EXIT
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
start=$(date +%s); left() { echo $(( ${DEADLINE:-125} - ($(date +%s) - start) )); }
SPOTS=bench/decode2.spots
spots() { grep -v '^\s*\(#\|$\)' "$SPOTS"; }
# solder_cmds ARGS...: every spot's solder command lines, each prefixed with its ENV words (as merged_call.sh)
solder_cmds() {
  spots | while read -r tag suite cases peers plimit envs; do
    out=$O/r/solder-$tag.jsonl; [ "$tag" = "-" ] && out=$O/r/solder.jsonl
    python3 bench/suites.py --suite "$suite" --cases "$cases" --solder-commands "$@" --out "$out" 2>/dev/null |
      sed "s|^|${envs:+$envs }|"
  done
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $O/r/device.txt
solder_cmds --compile-only --timeout 60 | xargs -d '\n' -P 8 -n 1 sh -c > $O/r/compile.log 2>&1 &
compile_pid=$!
echo "== 1. verification ($(left) s left)"
printf '%s\n' "examples/llama_decode.sol --small" "examples/llama_decode.sol" "examples/llama_decode.sol --dim KV=4096" \
  "examples/llama_decode.sol --dim KV=16384" "examples/mla_decode.sol --small" "examples/mla_decode.sol" \
  "examples/paged_decode.sol --small" "examples/paged_decode.sol" |
  xargs -d '\n' -P 8 -I{} sh -c "timeout 35 build/solder run --backend cuda {} > \$(echo '{}' | tr ' /=' '___').log 2>&1 \
    && echo 'verified {}' || echo \"FAILED (\$?) {}\"" > $O/r/verify.txt
mv -- *.log $O/r/ 2>/dev/null
cat $O/r/verify.txt
finish
echo "== 2. timings ($(left) s left)"
# merged_call.sh's step 3 (the same suites.py / peers.py commands and record files), without its 60 s
# guard per spot, which a 125 s call cannot afford; merged_table.py reads the records.
wait $compile_pid
solder_cmds --timeout 20 > $O/r/cmds.txt
while IFS= read -r line; do
  [ "$(left)" -lt 40 ] && { echo "   deadline before: $line"; break; }
  sh -c "$line" 2>> $O/r/solder.err < /dev/null
done < $O/r/cmds.txt
echo "   solder records $(cat $O/r/solder*.jsonl 2>/dev/null | wc -l) of $(wc -l < $O/r/cmds.txt) ($(left) s left)"
spots | while read -r tag suite cases peers plimit envs; do
  [ "$peers" = "-" ] && continue
  [ "$(left)" -lt 25 ] && { echo "   deadline before peers: $suite $cases"; break; }
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 18 )) python3 bench/peers.py --no-ceilings --out $O/r/peers.jsonl \
    --suite "$suite" --cases "$cases" --peers "$peers" --time-limit "$plimit" >> $O/r/peers.log 2>&1 < /dev/null
  echo "   peers $suite $cases $peers rc $? ($(left) s left)"
done
python3 bench/merged_table.py $O/r > $O/r/summary.md 2>&1
finish
echo "== 3. ncu ($(left) s left)"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for spec in new:1024 fused:1024 new:16384; do
  plan=${spec%%:*}; kv=${spec##*:}
  [ "$(left)" -lt 12 ] && { echo "   deadline before ncu $spec"; break; }
  env $([ "$plan" = fused ] && echo SOLDER_GEMV=0) timeout $(( $(left) - 3 )) $NCU --clock-control none \
    -k 'regex:_kernel$|^fused|_merge$' --launch-count 9 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
    build/solder bench examples/llama_decode.sol --dim KV=$kv --replays 1 --calls-per-replay 1 > $O/r/ncu-$plan-kv$kv.txt 2>&1
  echo "   ncu $spec rc $?"
  grep -E "^  [a-z_]+.*\(|gpu__time_duration|dram__bytes_read" $O/r/ncu-$plan-kv$kv.txt | head -40
  finish
done
echo "== done ($(left) s left)"
cat $O/r/summary.md 2>/dev/null
