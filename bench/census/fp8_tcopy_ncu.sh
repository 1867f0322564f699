#!/usr/bin/env bash
# fp8-tcopy's ncu step (issue 15, twenty-second session), run after bench/census/call_ab.sh in the same staged
# root: ncu of mm_e4m3_nn's transposing copy kernel (convert_c_b_f8e4m3) alone at 4096^3, one launch, for each
# form: byte and tile (SOLDER_TRANSPOSE_COPIES=byte / =tile; at the call's commit 1929e4c the byte form was the
# default and its run carried no knob), into r/ncu/FORM.csv,
# then r/ into $OUT/r.tgz. Each ncu run is limited to NCU_TIMEOUT (20) s.   (DRY_RUN=1: print the commands)
set -uo pipefail
r=r; out=${OUT:-/tmp/census-out}; mkdir -p "$r/ncu" "$out"
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,\
launch__occupancy_limit_shared_mem,sm__cycles_elapsed.avg.per_second,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum
for form in byte tile; do
  envs="SOLDER_TRANSPOSE_COPIES=$form"
  cmd="env $envs ncu --clock-control none --target-processes application-only --kernel-name regex:convert_c_b --launch-count 1
    --metrics $METRICS --page raw --csv --log-file $r/ncu/$form.csv
    build/solder bench tests/census/mm_e4m3_nn.sol --dim M=4096 --dim N=4096 --dim K=4096 --replays 1 --calls-per-replay 1"
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "timeout ${NCU_TIMEOUT:-20} $cmd" | tr -s ' \n' ' '; echo; continue; fi
  timeout "${NCU_TIMEOUT:-20}" $cmd > "$r/ncu/$form.out" 2>&1
  echo "ncu $form rc $? ($(grep -c '^"' "$r/ncu/$form.csv" 2>/dev/null) CSV lines)" | tee -a "$r/ncu/done.txt"
  tar czf "$out/r.tgz" "$r"
done
