#!/usr/bin/env bash
# The GEMM skeleton alone at 8192^3 in bf16 against cuBLAS, in interleaved rounds (issue 15's first target;
# eighteenth session, integrator). suite15's call timed it once, under the card's power cap (0.844x cuBLAS's
# rate, its fastest replay 0.985x); this call repeats it ROUNDS times (default 3), each round every variant
# then cuBLAS, the next round in reverse order, beside a clock log. Variants: the generated program with B
# stored N-major (bf16_rowscale_gemm.sol, w[HID, N]: suite15's cell), with B stored K-major
# (bf16_rowscale_gemm_kmajor.sol, w[N, HID]: cuBLAS's layout) on the planner's tile and on 128 x 256 x 64,
# 4 stages forced. Runs from a root staged by bench/merged_stage.sh, the CuTe headers in ../cutlass:
#   cd ROOT && bash bench/unpack_staged.sh && ROUNDS=3 bash bench/suite15/skeleton_ab.sh OUTDIR
# Output: OUTDIR/solder.jsonl (solder bench --json, with "tag", "round" and "span"), OUTDIR/peers.jsonl (cuBLAS:
# torch.matmul(a, b.t()) and torch.matmul(a, b), median of 21 replays of a graph of 4 calls), OUTDIR/clocks.csv.
set -uo pipefail
O=${1:?usage: bench/suite15/skeleton_ab.sh OUTDIR}; mkdir -p "$O"
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_CACHE_DIR=${SOLDER_CACHE_DIR:-$PWD/.cache/kernels}
DIMS="--dim T=8192 --dim HID=8192 --dim N=8192"
VARIANTS=(
  "nmajor||bench/programs/bf16_rowscale_gemm.sol"
  "kmajor||bench/programs/bf16_rowscale_gemm_kmajor.sol"
  "kmajor-128x256s4|SOLDER_GEMM_TILE=128x256s4k1@8192,8192,8192|bench/programs/bf16_rowscale_gemm_kmajor.sol"
)
solder() {  # TAG ENV PROGRAM ROUND
  local t0 t1 rec
  t0=$(date +%s.%N)
  rec=$(env $2 timeout 60 build/solder bench "$3" $DIMS --json 2>> "$O/solder.err")
  echo "   rc $?: $1 round $4"
  t1=$(date +%s.%N)
  [ -n "$rec" ] && echo "$rec" | sed "s/}[[:space:]]*\$/, \"tag\": \"$1\", \"round\": $4, \"span\": [$t0, $t1]}/" >> "$O/solder.jsonl"
}
cublas() {  # ROUND
  PYTHONUNBUFFERED=1 timeout 60 python3 - "$1" >> "$O/peers.jsonl" 2>> "$O/peers.err" <<'PY'
import json, sys, time
import torch
sys.path.insert(0, "bench/common")
from graph_timing import median_us
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for name, fn in (("cublas_bf16_kmajor", lambda: torch.matmul(a, b.t())), ("cublas_bf16_nmajor", lambda: torch.matmul(a, b))):
    t0 = time.time()
    us = median_us(fn, calls=4, replays=21)
    print(json.dumps({"peer": name, "round": int(sys.argv[1]), "median_us": us, "tflops": 2 * n**3 / us / 1e6,
                      "span": [t0, time.time()], "device": torch.cuda.get_device_name()}))
PY
  echo "   rc $?: cublas round $1"
}
fields=timestamp,clocks.sm,power.draw,clocks_event_reasons.active
echo "# ref $(date '+%s.%N %Y/%m/%d %H:%M:%S.%N') $fields" > "$O/clocks.csv"
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 100 >> "$O/clocks.csv" 2>&1 &
clock_pid=$!
for v in "${VARIANTS[@]}"; do IFS='|' read -r tag envs prog <<< "$v"; env $envs timeout 60 build/solder bench "$prog" $DIMS --compile-only > /dev/null 2>&1 & done
wait_compiles() { local p; for p in $(jobs -p); do [ "$p" = "$clock_pid" ] || wait "$p"; done; }
wait_compiles
for r in $(seq 1 "${ROUNDS:-3}"); do
  order=("${VARIANTS[@]}")
  if (( r % 2 == 0 )); then cublas "$r"; order=(); for ((i=${#VARIANTS[@]}-1; i>=0; i--)); do order+=("${VARIANTS[$i]}"); done; fi
  for v in "${order[@]}"; do IFS='|' read -r tag envs prog <<< "$v"; solder "$tag" "$envs" "$prog" "$r"; done
  (( r % 2 == 1 )) && cublas "$r"
done
kill $clock_pid 2>/dev/null
python3 - "$O" <<'PY'
import json, statistics, sys
o = sys.argv[1]
rows = {}
for f, key in (("solder.jsonl", "tag"), ("peers.jsonl", "peer")):
    try:
        for line in open(f"{o}/{f}"):
            r = json.loads(line)
            rows.setdefault(r[key], []).append(r.get("median_us"))
    except FileNotFoundError:
        pass
for k, v in rows.items():
    v = [x for x in v if x]
    if v:
        print(f"{k:24s} rounds {len(v)}  median of medians {statistics.median(v):9.2f} us  {2 * 8192**3 / statistics.median(v) / 1e6:6.1f} TFLOP/s  ({', '.join(f'{x:.1f}' for x in v)})")
PY
