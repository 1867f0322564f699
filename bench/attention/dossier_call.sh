#!/usr/bin/env bash
# Issue 17's dossier call (sixteenth session, branch attn-dossier): where a cell is missed, the ncu profile of
# its kernel. Runs on the device from the mini root that bench/merged_stage.sh stages (CuTe in ../cutlass),
# with the call's kernels compiled ahead on the build machine into kernels.tar.xz (same NVRTC, same paths):
#   cd .devcarry/attn-dossier && DEADLINE=124 bash bench/attention/dossier_call.sh
#   1. every Solder kernel of the call through `solder bench --compile-only`, nproc at a time (cache hits
#      where kernels.tar.xz matches; NVRTC otherwise);
#   2. the hd256 cells matching VERIFY_RE (default S 4k) verified by `solder run --backend cuda` against the
#      float64 reference, 4 at a time, each under VERIFY_SECONDS (the S 16k checks, VERIFY_LATE_RE, run last:
#      their sampled reference outlasted 40 s in the first call);
#   3. bench/merged_call.sh with bench/attention/dossier.spots, one round, no device tests or run.sh:
#      `solder bench` of hd256 and of the cuDNN-target missed cells, cuDNN SDPA in the same call;
#   4. ncu of each missed cell's Solder kernels (NCU_CELLS, the most-missed first): one `solder bench
#      --replays 1` under ncu (--launch-count = the program's kernels, --clock-control none, the sections
#      below, --page raw --csv), a cell only with NCU_MIN_LEFT s left; after the NCU_PEERS_AFTER-th cell, the
#      peers' kernels (dossier_peer_ncu.py under --profile-from-start off: PEER_CELLS, PEER_MODE), one ncu
#      process per cell (ncu prints a process's results when it ends: a cut loses that cell alone);
#   5. VERIFY_LATE_RE's checks with the time left, then dossier_table.py: the ncu table (ncu.md).
# The first call (2026-11-28, 5861734) ran every check before the timings and the peers in one process.
# Timings before the profiles: merged_call.sh's guards work against its own DEADLINE (MC_DEADLINE), and the
# timed steps must not be the part a late call loses; each ncu run is short and stands alone, so the list is
# cut from its end. Everything lands in a work folder packed into $OUT/dossier.tgz after every step (a call
# stopped at its limit still returns what finished); $OUT also gets log.txt, summary.md and ncu.md.
set -uo pipefail
OUTDIR=${OUT:-/tmp/out}; mkdir -p "$OUTDIR"
W=${WORK:-/tmp/dossier}; rm -rf "$W"; mkdir -p "$W/ncu"
exec > >(tee -a "$OUTDIR/log.txt") 2>&1
start=$(date +%s); left() { echo $(( ${DEADLINE:-124} - ($(date +%s) - start) )); }
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
pack() { tar czf "$OUTDIR/dossier.tgz.tmp" -C "$W" . && mv "$OUTDIR/dossier.tgz.tmp" "$OUTDIR/dossier.tgz"; }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NCU_CELLS=${NCU_CELLS:-"document_mask-d64-s4096 diff_attn-d64-s1024 evoformer-b1-d64 alibi-d64-s1024 vanilla-d64-s1024
  vanilla-d128-s1024 document_mask-d64-s16384 document_mask-d64-s1024 diff_attn-d64-s4096 diff_attn-d64-s16384
  alibi-d64-s16384 gqa-d64-s1024 vanilla-d128-s4096 causal-d128-s4096 vanilla-d128-s16384 causal-d128-s16384"}
PEER_CELLS=${PEER_CELLS:-"vanilla-d64-s1024:sdpa_cudnn,vanilla-d128-s1024:sdpa_cudnn,document_mask-d64-s4096:flex,alibi-d64-s1024:flex"}
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__registers_per_thread,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum

stamp "== 0. $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$W/device.txt")"
bash bench/unpack_staged.sh           # the staged binaries, as merged_call.sh unpacks them
[ -f kernels.tar.xz ] && python3 -c 'import tarfile; tarfile.open("kernels.tar.xz").extractall(".cache")' &&
  stamp "   $(ls .cache/kernels | wc -l) cached kernels unpacked"

ids_re() { echo "^($(echo "$@" | tr -s ' \n' '|' | sed 's/^|//; s/|$//'))\$"; }
SPOT_RE=$(grep -v '^\s*\(#\|$\)' bench/attention/dossier.spots | awk '{ print $3 }' | head -1)
stamp "== 1. compile"
{ python3 bench/suites.py --suite all --cases "$(ids_re $NCU_CELLS)" --solder-commands --compile-only --timeout 120
  python3 bench/suites.py --suite all --cases "$SPOT_RE" --solder-commands --compile-only --timeout 120; } |
  xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$W/compile.log" 2>&1
stamp "   rc $?: $(grep -c 'compiled in' "$W/compile.log") programs compiled; $(ls .cache/kernels | wc -l) kernels in the cache"

verify() {   # verify RE SECONDS: `solder run --backend cuda` of the hd256 cells matching RE, 4 at a time
  python3 bench/suites.py --suite attention_hd256 --cases="$1" --verify-commands --timeout "$2" |
    xargs -d '\n' -P 4 -I{} sh -c '{} > "$0/verify-$(echo {} | md5sum | cut -c1-8).txt" 2>&1 && echo "verified {}" || echo "FAILED ($?) {}"' "$W" |
    tee -a "$W/verify.txt"
}
stamp "== 2. verify hd256 ${VERIFY_RE:=-s4096\$} ($(left) s left)"
verify "$VERIFY_RE" "${VERIFY_SECONDS:-40}"
pack

stamp "== 3. timings: merged_call.sh, dossier.spots ($(left) s left)"
mc=${MC_DEADLINE:-95}; [ "$mc" -gt $(( $(left) - 20 )) ] && mc=$(( $(left) - 20 ))
OUT=$W DEADLINE=$mc ROUNDS=1 DEVICE_TESTS="" RUN_SH=0 SPOTS=bench/attention/dossier.spots bash bench/merged_call.sh
cp "$W/r/summary.md" "$OUTDIR/summary.md" 2>/dev/null; rm -f "$W/r.tgz" "$W/run.tgz"
pack

stamp "== 4. ncu ($(left) s left)"
n=0
peers_ncu() {  # one ncu process per CASE:PEER of PEER_CELLS, cuDNN's first as listed
  for pc in ${PEER_CELLS//,/ }; do
    if [ "$(left)" -lt "${PEER_MIN_LEFT:-12}" ]; then stamp "   peers from $pc on skipped ($(left) s left)"; return; fi
    f="$W/ncu/peer-${pc/:/-}"
    timeout $(( $(left) - 2 )) ncu --clock-control none --target-processes application-only --profile-from-start off \
      $SECTIONS --metrics "$METRICS" --page raw --csv --log-file "$f.csv" \
      python3 bench/attention/dossier_peer_ncu.py --cells "$pc" --compile-mode "${PEER_MODE:-default}" \
        --deadline $(( start + ${DEADLINE:-124} - 3 )) --flex-seconds "${PEER_FLEX_SECONDS:-12}" > "$f.out" 2>&1
    stamp "   peer $pc rc $?: $(grep -c '^profiled' "$f.out") profiled, $(grep -c '^"' "$f.csv" 2>/dev/null) CSV lines $(grep '^skip' "$f.out")"
    pack
  done
}
for cell in $NCU_CELLS; do
  n=$((n + 1))
  if [ "$(left)" -lt "${NCU_MIN_LEFT:-6}" ]; then stamp "   deadline: $cell and the rest not profiled"; break; fi
  args=$(python3 bench/suites.py --suite all --cases "^$cell\$" --solder-commands --out /dev/null | sed 's/^.* bench //; s/ --json.*//')
  kernels=$(build/solder emit --cuda $args 2>/dev/null | grep -c '^// ---- kernel ')
  [ "$kernels" -ge 1 ] 2>/dev/null || kernels=1
  t=$(( $(left) - 2 )); [ "$t" -gt 30 ] && t=30
  timeout "$t" ncu --clock-control none --target-processes application-only --kernel-name regex:'^fused' \
    --launch-count "$kernels" $SECTIONS --metrics "$METRICS" --page raw --csv --log-file "$W/ncu/$cell.csv" \
    build/solder bench $args --replays 1 --calls-per-replay 1 > "$W/ncu/$cell.out" 2>&1
  stamp "   $cell rc $? ($kernels kernel(s), $(grep -c '^"' "$W/ncu/$cell.csv" 2>/dev/null) CSV lines)"
  pack
  [ "$n" = "${NCU_PEERS_AFTER:-6}" ] && peers_ncu
done
[ "$n" -lt "${NCU_PEERS_AFTER:-6}" ] && peers_ncu

if [ -n "${VERIFY_LATE_RE=-s16384\$}" ] && [ "$(left)" -gt $(( ${VERIFY_SECONDS:-40} + 5 )) ]; then
  stamp "== 5. verify hd256 $VERIFY_LATE_RE ($(left) s left)"
  verify "$VERIFY_LATE_RE" $(( $(left) - 4 ))
fi
stamp "== 6. table ($(left) s left)"
python3 bench/attention/dossier_table.py "$W/ncu" --md "$W/ncu.md" > /dev/null
cp "$W/ncu.md" "$OUTDIR/ncu.md" 2>/dev/null
pack
cat "$W/r/summary.md" 2>/dev/null | head -40
cat "$W/ncu.md"
stamp "== done ($(left) s left)"
