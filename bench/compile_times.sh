#!/usr/bin/env bash
# Compile and plan time per example (issue 15 target: at most 10 s cold per program, 0 warm; plan under
# 1 s), no GPU needed:
#
#   bench/compile_times.sh OUT.md [SOLDER]
#
# For every examples/*.sol at its default (paper) sizes: `solder bench --compile-only` into an empty
# cache (cold: NVRTC, every kernel), then again (warm: the cache), then `solder plan` (the tile
# planner); a program of several kernels is compiled cold once more as one translation unit
# (SOLDER_COMPILE_JOBS=1), for comparison. Programs run one after another so that each cold compile has the machine's cores to
# itself (a program of several kernels compiles them in parallel, $SOLDER_COMPILE_JOBS). Writes a
# markdown table to OUT.md, with the machine and the commit ($SOLDER_COMMIT or git).
# Env: EXAMPLES="ffn nerf_mlp ..." times only those; ONE_UNIT=0 skips the one-unit comparison.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/compile_times.sh OUT.md [SOLDER]}
solder=${2:-build/solder}
commit=${SOLDER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
seconds() { python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.2f}')" "$1"; }
{
  echo "| program | kernels | cold compile s | cold, one unit s | warm s | plan s |"
  echo "|---|---|---|---|---|---|"
} > "$out.rows"
files=examples/*.sol
[ -n "${EXAMPLES:-}" ] && files=$(for e in $EXAMPLES; do echo "examples/$e.sol"; done)
for file in $files; do
  name=$(basename "$file" .sol)
  cache=$(mktemp -d)
  t0=$(date +%s.%N)
  line=$(SOLDER_CACHE_DIR=$cache timeout 300 "$solder" bench "$file" --compile-only 2>&1 | tail -1)
  cold=$(seconds "$t0")
  t0=$(date +%s.%N)
  SOLDER_CACHE_DIR=$cache timeout 60 "$solder" bench "$file" --compile-only > /dev/null 2>&1
  warm=$(seconds "$t0")
  t0=$(date +%s.%N)
  timeout 60 "$solder" plan "$file" > /dev/null 2>&1
  plan=$(seconds "$t0")
  rm -rf "$cache"
  kernels=$(echo "$line" | sed -n 's/.*: \([0-9]*\) kernel(s).*/\1/p')
  case "$line" in *"compiled in"*|*"already in"*) ;; *) cold="failed: ${line:0:80}";; esac
  single="="; [ "${kernels:-1}" -gt 1 ] && single="—"
  if [ "${kernels:-1}" -gt 1 ] && [ "${ONE_UNIT:-1}" = 1 ]; then  # the same compile as one translation unit, for comparison
    cache=$(mktemp -d)
    t0=$(date +%s.%N)
    SOLDER_COMPILE_JOBS=1 SOLDER_CACHE_DIR=$cache timeout 300 "$solder" bench "$file" --compile-only > /dev/null 2>&1
    single=$(seconds "$t0")
    rm -rf "$cache"
  fi
  echo "| $name | ${kernels:-?} | $cold | $single | $warm | $plan |" | tee -a "$out.rows"
done
{
  echo "# Compile and plan time per example (default sizes)"
  echo
  echo "Machine: $(nproc) hardware threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); NVRTC compile"
  echo "jobs: ${SOLDER_COMPILE_JOBS:-all threads (at most 16)}. Commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "Each time is the wall time of the whole command (process start, parse, fuse, codegen, NVRTC or the"
  echo "cache). \"cold, one unit\": the same with SOLDER_COMPILE_JOBS=1 (\"=\" for one kernel). Target"
  echo "(issue 15): cold at most 10 s, warm 0 (the cache), plan under 1 s."
  echo
  cat "$out.rows"
} > "$out"
rm -f "$out.rows"
