#!/usr/bin/env bash
# nmajor's device call (issue 15, twenty-first session), from a root staged by bench/nmajor/stage.sh (CuTe
# headers in ../cutlass, every kernel of the call compiled ahead in kernels.tar.xz):
#   cd .devcarry/nmajor && LIMIT=124 bash bench/nmajor/call.sh          (DRY_RUN=1: print the commands)
#   0. nvidia-smi every 100 ms into r/clocks.csv (SM and memory clock, power, temperature, clock-event
#      reasons) for the whole call;
#   1. `solder run --backend cuda` of every line of bench/nmajor/verify.txt (ENV or -, then the arguments),
#      4 at a time, into r/verify.txt and r/v-*.txt;
#   2. round 1: `solder bench --json` of every line of bench/nmajor/cells.txt (TAG ENV ARGS), into
#      r/solder.jsonl (each record with its tag and round);
#   3. bench/census/peers.py (eager, torch.compile default mode) of PEER_CELLS, into r/peers.jsonl;
#   4. ncu of NCU_CELLS (tags of cells.txt; one ncu process per tag, the first launch of its kernel,
#      --clock-control none, the s7_model/call.sh sections and metrics plus the shared-memory bank conflicts),
#      no tag started after NCU_SECONDS from the start, into r/ncu/TAG.csv;
#   5. rounds 2 .. ROUNDS (default 3), even rounds in the reverse order, while 25 s are left.
# r/ is packed into $OUT/r.tgz after every step; $OUT/call.log is the output.
. bench/call_prologue.sh
r=r; mkdir -p "$r/ncu"
pack() { [ "$DRY" = 1 ] || tar czf "$O/r.tgz" "$r"; }
run() { if [ "$DRY" = 1 ]; then echo "$*"; else eval "$@"; fi; }
cells=bench/nmajor/cells.txt
tags=$(grep -v '^\s*\(#\|$\)' "$cells" | awk '{print $1}')
line() { grep -v '^\s*\(#\|$\)' "$cells" | awk -v t="$1" '$1 == t'; }
envs() { line "$1" | awk '{print ($2 == "-") ? "" : $2}'; }
args() { line "$1" | cut -d' ' -f2- | sed -E 's/^ *[^ ]+ +//'; }

if [ "$DRY" != 1 ]; then
  nvidia-smi > "$r/device.txt" 2>&1; cat COMMIT >> "$r/device.txt"
  echo "# ref $(date +%s.%N) $(date -u +%FT%TZ)" > "$r/clocks.csv"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 >> "$r/clocks.csv" 2>&1 &
  clock_pid=$!
fi

stamp "== 1. verify ($(left) s left)"
grep -v '^\s*\(#\|$\)' bench/nmajor/verify.txt | while read -r env rest; do
  [ "$env" = - ] && env=
  name=$(echo "$env $rest" | tr -c 'A-Za-z0-9=' _)
  echo "env $env timeout 40 build/solder run $rest --backend cuda > $r/v-$name.txt 2>&1; echo \"\$? $env $rest\" >> $r/verify.txt"
done > "$r/verify.cmds"
if [ "$DRY" = 1 ]; then cat "$r/verify.cmds"; else xargs -d '\n' -P 4 -n 1 sh -c < "$r/verify.cmds"; cat "$r/verify.txt"; fi
pack

bench_round() {
  local round=$1 list=$tags
  [ $((round % 2)) = 0 ] && list=$(echo $tags | tr ' ' '\n' | tac)
  for tag in $list; do
    if [ "$DRY" != 1 ] && [ "$(left)" -lt "${2:-25}" ]; then echo "skipped $tag round $round" >> "$r/skipped.txt"; continue; fi
    run "env $(envs $tag) timeout 25 build/solder bench $(args $tag) --json 2>>$r/solder.err | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d[\"tag\"]=\"$tag\"; d[\"round\"]=$round; print(json.dumps(d))' >> $r/solder.jsonl"
  done
  [ "$DRY" = 1 ] || python3 -c "
import json
for l in open('$r/solder.jsonl'):
    d = json.loads(l)
    if d['round'] == $round: print('   round $round', d['tag'], round(d['median_us'], 2), round(d['min_us'], 2))"
  pack
}
stamp "== 2. round 1 ($(left) s left)"
bench_round 1 40

p=$(left); stamp "== 3. peers ($p s left)"
[ "$DRY" = 1 ] || [ "$p" -gt 60 ] && run "timeout $(( p > 95 ? 40 : p - 55 )) python3 bench/census/peers.py --cells ${PEER_CELLS:-bmm_broadcast_left,mm_bf16_nn,mm_bf16_nt,two_axes_mkr} --out $r/peers.jsonl > $r/peers.log 2>&1"
[ "$DRY" = 1 ] || python3 -c "
import json
for l in open('$r/peers.jsonl'):
    d = json.loads(l); print('  ', d.get('cell', d.get('program')), d.get('peer'), round(d.get('median_us', 0), 2), d.get('rel_err'))" 2>/dev/null
pack

stamp "== 4. ncu ($(left) s left)"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,\
lts__t_sector_hit_rate.pct,lts__t_bytes.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max,\
lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,\
lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
for tag in ${NCU_CELLS:-nn nt bmm bmm-main}; do
  if [ "$DRY" != 1 ] && [ $(( $(date +%s) - start )) -ge "${NCU_SECONDS:-100}" ]; then stamp "   ncu budget spent: $tag and the rest not profiled"; break; fi
  cmd="env $(envs $tag) ncu --clock-control none --target-processes application-only --kernel-name regex:_kernel --launch-count 1
    $SECTIONS --metrics $METRICS --page raw --csv --log-file $r/ncu/$tag.csv
    build/solder bench $(args $tag) --replays 1 --calls-per-replay 1"
  if [ "$DRY" = 1 ]; then echo "timeout 25 $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout 25 $cmd > "$r/ncu/$tag.out" 2>&1
  stamp "   $tag rc $? ($(grep -c '^"' "$r/ncu/$tag.csv" 2>/dev/null) CSV lines)"
  pack
done

for round in $(seq 2 "${ROUNDS:-3}"); do
  stamp "== 5. round $round ($(left) s left)"
  bench_round "$round" 25
done
[ "$DRY" = 1 ] || kill "$clock_pid" 2>/dev/null
stamp "== done ($(left) s left)" | tee "$r/done.txt"
pack
