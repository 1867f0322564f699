#!/usr/bin/env bash
# The device calls of the gemm-chains2 work (issue 15: clusters for the M = 128 GEMMs of gemm_chains):
# the skeleton's device test (clusters along N included), a tile sweep of the S1 / G5 products with
# each tile forced (SOLDER_GEMM_TILE, clusters included), an ncu profile of chosen tiles (L2 and DRAM
# throughput), then the gemm_chains suite: Solder's cases first, then the peers (torch eager and
# torch.compile) in the same call.
#
#   bench/gemm_chains_cluster.sh OUTDIR CARRY_DIR
#
# SOLDER_ROOT: the checkout to run in (default: this script's). CARRY_DIR holds a stripped `solder`,
# `test_sm90_gemm` and libgomp.so.1. Env: SOLDER_CUTLASS_INCLUDE;
# STEPS (default "test verify sweep ncu solder peers"); CASES (suite case ids, default: every
# gemm_chains case); SWEEP ('program.sol|dims|tile tile ...' specs, ';'-separated; default below);
# VERIFY ('|'-separated `solder run` argument lists, each optionally prefixed by SOLDER_*=VALUE settings);
# NCU ('TILE program.sol dims' specs, ';'-separated); PEERS_LIMIT (seconds, default 200); DEADLINE (s
# from the start after which no Solder case or sweep point starts, default 380).
set -uo pipefail
cd "${SOLDER_ROOT:-$(dirname "$0")/..}"
out=${1:?usage: bench/gemm_chains_cluster.sh OUTDIR CARRY_DIR}
carry=${2:?usage: bench/gemm_chains_cluster.sh OUTDIR CARRY_DIR}
mkdir -p "$out" build
cp "$carry/solder" build/solder
export SOLDER_CACHE_DIR=$PWD/build/kernel-cache
export LD_LIBRARY_PATH=$PWD/$carry:${LD_LIBRARY_PATH:-}
steps=${STEPS:-"test verify sweep ncu solder peers"}
deadline=${DEADLINE:-380}
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
has() { [[ " $steps " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee -a "$out/device.txt"

cases=${CASES:-$(python3 -c "import sys; sys.path.insert(0, 'bench'); import suites; print(' '.join(c.id for c in suites.ALL_CASES if c.suite == 'gemm_chains'))")}
case_args() {  # examples/WORKLOAD.sol --dim ... of a suite case id
  python3 -c "import sys; sys.path.insert(0, 'bench'); import suites; c = suites.CASES_BY_ID['$1']; print(f'examples/{c.workload}.sol ' + ' '.join(f'--dim {k}={v}' for k, v in c.overrides.items()))"
}
variant=${VARIANT:-1x2}  # step "variant": these cases again with SOLDER_GEMM_CLUSTER=$variant
variant_cases=${VARIANT_CASES:-$cases}
U="bench/gemm/skinny.sol|--dim N=8192 --dim K=3072"
D="bench/gemm/skinny.sol|"
G="bench/gemm/gated_up.sol|"
U5="bench/gemm/skinny.sol|--dim N=16384 --dim K=4096"
D5="bench/gemm/skinny.sol|--dim N=4096 --dim K=16384"
sweep=${SWEEP:-"$U|128x64s6k1 128x64s8k1 128x64s6k1c1x2 128x64s8k1c1x2 128x64s6k1c1x4 64x128s8k1 64x128s8k1c1x2 64x128s8k1c2x1 64x128s6k1c2x1 128x128s6k1c1x2 64x256s5k1c2x1;\
$D|64x64s8k1 64x64s8k1c1x2 64x64s8k1c2x1 64x64s8k1c1x4 64x128s8k1 64x128s8k1c2x1 128x64s8k1c1x2 128x64s8k2c1x2 64x128s8k2 64x128s8k2c2x1;\
$G|128x64s5k1 128x64s5k1c1x2 128x64s5k1c1x4 128x64s4k1c1x2 64x128s5k1 64x128s5k1c1x2 64x64s8k1c1x2;\
$U5|128x128s5k1 128x128s5k1c1x2 128x128s5k1c1x4 128x64s6k1c1x2 64x256s5k1c2x1;\
$D5|128x64s6k2 128x64s6k2c1x2 64x64s8k1c2x1 64x64s8k1c1x2 64x64s8k2c2x1"}
verify=${VERIFY:-"SOLDER_GEMM_TILE=128x64s6k1c1x2 bench/gemm/skinny.sol --dim N=1000 --dim K=520|SOLDER_GEMM_TILE=128x64s6k1c1x4 bench/gemm/skinny.sol --dim N=1000 --dim K=520|SOLDER_GEMM_TILE=64x128s8k1c2x1 bench/gemm/skinny.sol --dim M=100 --dim N=1000 --dim K=520|SOLDER_GEMM_TILE=128x64s8k2c1x2 bench/gemm/skinny.sol --dim N=1000 --dim K=1030|SOLDER_GEMM_TILE=128x64s5k1c1x2 bench/gemm/gated_up.sol --dim M=100 --dim N=1000 --dim K=520|SOLDER_GEMM_TILE=128x64s5k1c1x4 bench/gemm/gated_up.sol --dim M=100 --dim N=1000 --dim K=520|SOLDER_GEMM_CLUSTER=1x2 examples/ffn.sol|SOLDER_GEMM_CLUSTER=1x2 examples/gated_ffn.sol --dim N=3072 --dim K=1024 --dim L=1024|SOLDER_GEMM_CLUSTER=1x2 examples/ffn.sol --dim N=1024 --dim K=4096 --dim L=4096|examples/gated_ffn.sol --dim N=3072 --dim K=768 --dim L=768"}

if has test; then
  # Correctness only: runs while the compile cache fills (CPU), before any timing.
  echo "== 1. GEMM skeleton device test (tests/gpu/gemm, clusters along N included), beside step 0"
  ( timeout 200 "$carry/test_sm90_gemm" 2026 > "$out/gemm-test.log" 2>&1; echo "rc=$?" >> "$out/gemm-test.log" ) &
  test_pid=$!
fi
# The configurations each case runs (as `solder emit --cuda` names them), default and variant.
( for id in $cases; do
    for v in "" $( has variant && echo "$variant" ); do
      printf '%s\t%s\t%s\n' "$id" "${v:-model}" "$(SOLDER_GEMM_CLUSTER=$v build/solder emit --cuda $(case_args "$id") 2>/dev/null | grep '^// on the sm_90a' | sed 's/.*Config<//; s/solder::gemm::Dtype:://g; s/>.*//' | tr '\n' ';')"
    done
  done > "$out/configs.tsv" ) &
echo "== 0. compile cache ($(nproc) in parallel)"
{
  if has solder; then for id in $cases; do echo "build/solder bench $(case_args "$id") --compile-only"; done; fi
  if has variant; then for id in $variant_cases; do echo "SOLDER_GEMM_CLUSTER=$variant build/solder bench $(case_args "$id") --compile-only"; done; fi
  if has sweep; then
    IFS=';' read -r -a specs <<< "$sweep"
    for spec in "${specs[@]}"; do
      IFS='|' read -r prog dims tiles <<< "$spec"
      echo "build/solder bench $prog $dims --compile-only"
      for t in $tiles; do echo "SOLDER_GEMM_TILE=$t build/solder bench $prog $dims --compile-only"; done
    done
  fi
} | xargs -d '\n' -P "$(nproc)" -n 1 sh -c > "$out/compile.log" 2>&1
echo "   compile errors: $(grep -ci error "$out/compile.log"); $(el) s"

if has test; then
  wait "$test_pid"
  echo "== 1. device test: $(tail -n 1 "$out/gemm-test.log"), $(grep -c '^PASS' "$out/gemm-test.log") PASS, $(grep -c '^FAIL' "$out/gemm-test.log") FAIL; $(tail -n 2 "$out/gemm-test.log" | head -n 1)"
  grep '^FAIL' "$out/gemm-test.log" | head -8
  echo "   $(el) s"
fi

if has verify; then
  echo "== 2. verified through the CUDA backend (in parallel; TILE= forces the tile)"
  : > "$out/verify.tsv"
  IFS='|' read -r -a vlist <<< "$verify"
  for spec in "${vlist[@]}"; do
    (
      read -r -a toks <<< "$spec"
      envs=()
      while [ ${#toks[@]} -gt 0 ] && [[ "${toks[0]}" == SOLDER_*=* ]]; do envs+=("${toks[0]}"); toks=("${toks[@]:1}"); done
      r=$(env "${envs[@]}" timeout 200 build/solder run --backend cuda "${toks[@]}" 2>&1 | tail -n 1)
      printf '%s\t%s\t%s\n' "${envs[*]:-model}" "${toks[*]}" "$r" >> "$out/verify.tsv"
    ) &
  done
  wait
  cat "$out/verify.tsv"
  echo "   $(el) s"
fi

us_of() { python3 -c 'import json,sys
try: print("%.2f" % json.loads(sys.stdin.read())["median_us"])
except Exception: print("failed")'; }

if has sweep; then
  echo "== 3. tile sweep (SOLDER_GEMM_TILE; the model's choice last)"
  : > "$out/sweep.tsv"
  IFS=';' read -r -a specs <<< "$sweep"
  for spec in "${specs[@]}"; do
    IFS='|' read -r prog dims tiles <<< "$spec"
    for t in $tiles; do
      [ "$(el)" -gt "$deadline" ] && { echo "   deadline: stopped"; break 2; }
      us=$(SOLDER_GEMM_TILE=$t timeout 60 build/solder bench $prog $dims --json 2>>"$out/sweep.err" | tail -n 1 | us_of)
      printf '%s\t%s\t%s\t%s\n' "$prog" "$dims" "$t" "$us" | tee -a "$out/sweep.tsv"
    done
    us=$(timeout 60 build/solder bench $prog $dims --json 2>>"$out/sweep.err" | tail -n 1 | us_of)
    printf '%s\t%s\t%s\t%s\n' "$prog" "$dims" "model" "$us" | tee -a "$out/sweep.tsv"
  done
  echo "   $(el) s"
fi

if has ncu && [ -n "${NCU:-}" ]; then
  echo "== 4. ncu (L2 and DRAM throughput, time) of chosen tiles"
  metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,launch__cluster_dim_x,launch__grid_size
  IFS=';' read -r -a nlist <<< "$NCU"
  for spec in "${nlist[@]}"; do
    read -r tile prog dims <<< "$spec"
    label=$(echo "$tile-$(basename "$prog" .sol)-$dims" | tr ' =/' '__-')
    [ "$tile" = model ] && tile=""
    # shellcheck disable=SC2086
    SOLDER_GEMM_TILE=$tile timeout 120 ncu --clock-control none --launch-count 4 --metrics "$metrics" --csv --page raw \
      build/solder run --backend cuda $prog $dims > "$out/ncu-$label.csv" 2> "$out/ncu-$label.err"
    echo "   $label rc=$?"
    python3 - "$out/ncu-$label.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 3: print("   no kernels"); sys.exit(0)
head = rows[0]; col = {n: i for i, n in enumerate(head)}
seen = set()
for r in rows[2:]:
    name = r[col["Kernel Name"]][:30]
    if name in seen: continue
    seen.add(name)
    g = lambda m: r[col[m]] if m in col else "?"
    print(f"   {name:30s} us={float(g('gpu__time_duration.sum'))/1e3:.1f} dram%={g('dram__throughput.avg.pct_of_peak_sustained_elapsed')} "
          f"dramMB={float(g('dram__bytes_read.sum'))/1e6:.1f} l2%={g('lts__throughput.avg.pct_of_peak_sustained_elapsed')} "
          f"l2MB={float(g('lts__t_bytes.sum'))/1e6:.1f} l2readMB={float(g('lts__t_sectors_srcunit_tex_op_read.sum'))*32/1e6:.1f} "
          f"tensor%={g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')} "
          f"lsb={g('smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio')} "
          f"cluster={g('launch__cluster_dim_x')} grid={g('launch__grid_size')}")
PY
  done
  echo "   $(el) s"
fi

if has solder; then
  echo "== 5. gemm_chains: Solder (solder bench --json), one case at a time"
  : > "$out/solder.jsonl"
  for id in $cases; do
    [ "$(el)" -gt "$deadline" ] && { echo "   deadline: stopped before $id"; break; }
    line=$(timeout 100 build/solder bench $(case_args "$id") --json 2>>"$out/bench.err" | tail -n 1)
    echo "{\"case\": \"$id\", \"result\": ${line:-null}}" >> "$out/solder.jsonl"
    echo "$id: $(echo "$line" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us (floor %.1f us), %d kernels" % (r["median_us"], r["floor_us"], r.get("kernels", 0)))
except Exception as e: print("failed", e)')"
  done
  echo "   $(el) s"
fi

if has variant; then
  echo "== 5b. gemm_chains: Solder with SOLDER_GEMM_CLUSTER=$variant (the cost model's best $variant configurations)"
  : > "$out/solder-$variant.jsonl"
  for id in $variant_cases; do
    [ "$(el)" -gt "$deadline" ] && { echo "   deadline: stopped before $id"; break; }
    line=$(SOLDER_GEMM_CLUSTER=$variant timeout 100 build/solder bench $(case_args "$id") --json 2>>"$out/bench.err" | tail -n 1)
    echo "{\"case\": \"$id\", \"cluster\": \"$variant\", \"result\": ${line:-null}}" >> "$out/solder-$variant.jsonl"
    echo "$id $variant: $(echo "$line" | python3 -c 'import json,sys
try:
  r=json.loads(sys.stdin.read()); print("%.1f us" % r["median_us"])
except Exception as e: print("failed", e)')"
  done
  echo "   $(el) s"
fi

if has peers; then
  echo "== 6. peers (same call): torch eager and torch.compile"
  regex="^($(echo $cases | tr ' ' '|'))$"
  [ -n "${PEERS_AUTO:-}" ] && PEERS_LIMIT=$(( PEERS_AUTO - $(el) ))
  timeout $(( ${PEERS_LIMIT:-200} + 40 )) python3 bench/peers.py --suite gemm_chains --cases "$regex" --peers eager,compile \
    --out "$out/peers.jsonl" --time-limit ${PEERS_LIMIT:-200} --no-ceilings 2>&1 | grep -v "^  triton_mm\|^  mm \|AUTOTUNE\|strides:\|dtypes:\|Autotune Choices\|num_choices\|SingleProcess" | tail -n 45
  echo "   $(el) s"
fi
echo "== total $(el) s"
