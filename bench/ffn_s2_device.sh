#!/usr/bin/env bash
# One device call for issue 15, branch ffn-s2 (2026-11-27, eleventh session): ffn / gated_ffn S2 and S6
# against cuBLAS, and the whole gemm_chains suite, linear_relu_backward and nerf_mlp with their peers.
#   0. every program of the call compiled by NVRTC in parallel (background), while
#   1. the peers run: eager (cuBLAS) on the 36 gemm_chains cells (bench/peers.py), then cuBLAS's kernels
#      at ffn S2 and S6 (bench/peer_kernels.py: torch.profiler names, grids, times);
#   2. `solder run --backend cuda` (float64 reference) of the candidate choices (background, niced);
#   3. the sweep at S2 / S6: whole cases with one product's tile forced (SOLDER_GEMM_TILE=TILE@M,N,K),
#      programmatic dependent launch for every skeleton kernel (SOLDER_PDL=all), the default between;
#   4a. `solder bench` of gated_ffn S8 and G1-G10 (never timed on this tree);
#   5. linear_relu_backward and nerf_mlp (dw's tile forced, PDL for all);
#   4b. `solder bench` of the other gemm_chains cells (S2 / S6 are the sweep's base rows);
#   6. with time left: torch.compile of linear_relu_backward / nerf_mlp, and the down projections alone
#      (bench/gemm/skinny.sol) for `solder plan --validate`.
# Every step is guarded by the time left (DEADLINE seconds): what does not fit is skipped and listed.
# Run from the carry folder (stripped solder, examples/, bench/*.py, bench/gemm/skinny.sol, commit.txt):
#   cd .devcarry/ffn-s2 && DEADLINE=150 bash ffn_s2_device.sh
# The results folder is tarred into $OUT (ffn-s2.tgz) after every section, and the summary copied there.
set -uo pipefail
O=${OUT:-/tmp/out}; W=/tmp/ffn-s2-work; out=$W/s2  # $OUT gets the tarball and the summary only
start=$(date +%s); left() { echo $(( ${DEADLINE:-150} - ($(date +%s) - start) )); }
pack() { mkdir -p "$O"; tar czf "$O/ffn-s2.tgz" -C "$W" s2; }
export SOLDER_CUTLASS_INCLUDE=${SOLDER_CUTLASS_INCLUDE:-$PWD/../cutlass} SOLDER_CACHE_DIR=$PWD/cache
export SOLDER_COMMIT=$(cut -d' ' -f1 commit.txt 2>/dev/null)
chmod +x solder 2>/dev/null
S=$PWD/solder

S2="--dim M=128 --dim N=5632 --dim K=2048 --dim L=2048"; S6="--dim M=128 --dim N=8960 --dim K=1536 --dim L=1536"
S1="--dim M=128 --dim N=8192 --dim K=3072 --dim L=3072"; S8="--dim M=128 --dim N=3072 --dim K=1024 --dim L=1024"
D2="@128,2048,5632"; U2="@128,5632,2048"; D6="@128,1536,8960"; U6="@128,8960,1536"  # down / up products
LRB_DW="@256,256,65536"
# label|env|program and dims ('-' = no env: the planner's choice)
SWEEP="ffn-S2 base|-|examples/ffn.sol $S2
ffn-S2 pdl-all|SOLDER_PDL=all|examples/ffn.sol $S2
ffn-S2 down 64x64s14k2|SOLDER_GEMM_TILE=64x64s14k2$D2|examples/ffn.sol $S2
ffn-S2 down 64x64s14k2 pdl-all|SOLDER_PDL=all SOLDER_GEMM_TILE=64x64s14k2$D2|examples/ffn.sol $S2
ffn-S2 down 128x64s6k4|SOLDER_GEMM_TILE=128x64s6k4$D2|examples/ffn.sol $S2
ffn-S2 down 64x128s9k4|SOLDER_GEMM_TILE=64x128s9k4$D2|examples/ffn.sol $S2
ffn-S2 up 64x128s9k1|SOLDER_GEMM_TILE=64x128s9k1$U2|examples/ffn.sol $S2
ffn-S2 base|-|examples/ffn.sol $S2
ffn-S6 base|-|examples/ffn.sol $S6
ffn-S6 pdl-all|SOLDER_PDL=all|examples/ffn.sol $S6
ffn-S6 down 128x64s6k5|SOLDER_GEMM_TILE=128x64s6k5$D6|examples/ffn.sol $S6
ffn-S6 down 128x64s6k5 pdl-all|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k5$D6|examples/ffn.sol $S6
ffn-S6 down 64x64s14k2|SOLDER_GEMM_TILE=64x64s14k2$D6|examples/ffn.sol $S6
ffn-S6 up 64x192s7k1|SOLDER_GEMM_TILE=64x192s7k1$U6|examples/ffn.sol $S6
ffn-S6 up 128x64s6k1|SOLDER_GEMM_TILE=128x64s6k1$U6|examples/ffn.sol $S6
ffn-S6 base|-|examples/ffn.sol $S6
gated_ffn-S2 base|-|examples/gated_ffn.sol $S2
gated_ffn-S2 down 64x64s14k2 pdl-all|SOLDER_PDL=all SOLDER_GEMM_TILE=64x64s14k2$D2|examples/gated_ffn.sol $S2
gated_ffn-S6 base|-|examples/gated_ffn.sol $S6
gated_ffn-S6 down 128x64s6k5 pdl-all|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k5$D6|examples/gated_ffn.sol $S6
ffn-S1 pdl-all|SOLDER_PDL=all|examples/ffn.sol $S1
ffn-S8 pdl-all|SOLDER_PDL=all|examples/ffn.sol $S8"
# label|env|program and dims: the candidates through --backend cuda against float64
VERIFY="ffn.S2.d64x64k2.pdl|SOLDER_PDL=all SOLDER_GEMM_TILE=64x64s14k2$D2|examples/ffn.sol $S2
ffn.S6.d128x64k5.pdl|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k5$D6|examples/ffn.sol $S6
gated_ffn.S2.d64x64k2.pdl|SOLDER_PDL=all SOLDER_GEMM_TILE=64x64s14k2$D2|examples/gated_ffn.sol $S2
gated_ffn.S6.d128x64k5.pdl|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k5$D6|examples/gated_ffn.sol $S6
lrb.nerf.dw-c1x2.pdl|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k16c1x2$LRB_DW|examples/linear_relu_backward.sol"
# label|env|program and dims: linear_relu_backward's variants (the suite's default runs in section 5 too)
LRB="lrb-nerf dw 128x64s6k16c1x2|SOLDER_GEMM_TILE=128x64s6k16c1x2$LRB_DW|examples/linear_relu_backward.sol
lrb-nerf pdl-all|SOLDER_PDL=all|examples/linear_relu_backward.sol
lrb-nerf dw c1x2 pdl-all|SOLDER_PDL=all SOLDER_GEMM_TILE=128x64s6k16c1x2$LRB_DW|examples/linear_relu_backward.sol
nerf_mlp pdl-all|SOLDER_PDL=all|examples/nerf_mlp.sol"
# label|env|dims of bench/gemm/skinny.sol (the down projection alone)
SKINNY="S2 64x64s14k1|SOLDER_GEMM_TILE=64x64s14k1|--dim N=2048 --dim K=5632
S2 64x64s14k2|SOLDER_GEMM_TILE=64x64s14k2|--dim N=2048 --dim K=5632
S2 128x64s6k4|SOLDER_GEMM_TILE=128x64s6k4|--dim N=2048 --dim K=5632
S2 64x128s9k4|SOLDER_GEMM_TILE=64x128s9k4|--dim N=2048 --dim K=5632
S2 128x128s5k8|SOLDER_GEMM_TILE=128x128s5k8|--dim N=2048 --dim K=5632
S6 128x64s6k4|SOLDER_GEMM_TILE=128x64s6k4|--dim N=1536 --dim K=8960
S6 128x64s6k5|SOLDER_GEMM_TILE=128x64s6k5|--dim N=1536 --dim K=8960
S6 64x64s14k2|SOLDER_GEMM_TILE=64x64s14k2|--dim N=1536 --dim K=8960
S6 64x128s9k5|SOLDER_GEMM_TILE=64x128s9k5|--dim N=1536 --dim K=8960
S6 64x64s14k1|SOLDER_GEMM_TILE=64x64s14k1|--dim N=1536 --dim K=8960"
envof() { [ "$1" = - ] && echo "" || echo "$1"; }

compile_commands() {  # every program of the call, --compile-only (NVRTC into SOLDER_CACHE_DIR)
  python3 bench/suites.py --suite gemm_chains --solder-commands --compile-only --solder "$S" --timeout 100
  python3 bench/suites.py --suite contractions --cases '^(linear_relu_backward|nerf_mlp)' --solder-commands --compile-only --solder "$S" --timeout 100
  for list in "$SWEEP" "$VERIFY" "$LRB"; do
    echo "$list" | while IFS='|' read -r label env args; do echo "env $(envof "$env") timeout 100 $S bench $args --compile-only"; done
  done
  echo "$SKINNY" | while IFS='|' read -r label env dims; do echo "env $env timeout 100 $S bench bench/gemm/skinny.sol $dims --compile-only"; done
}
if [ "${1:-}" = --list-compile ]; then S=${2:-solder}; compile_commands | sort -u; exit 0; fi
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$out/device.txt"
echo "solder $(cat commit.txt 2>/dev/null); $(date -u +%FT%TZ)" | tee -a "$out/device.txt"

echo "== 0. compile every program (NVRTC, $(nproc) CPUs, background) ($(left) s left)"
compile_commands | sort -u > "$out/compile-cmds.txt"
timeout 70 xargs -d "\n" -P "$(nproc)" -n 1 sh -c < "$out/compile-cmds.txt" > "$out/compile.log" 2>&1 &
compile_pid=$!

echo "== 1. peers: eager (cuBLAS) on gemm_chains, cuBLAS's kernels at S2 / S6 ($(left) s left)"
PYTHONUNBUFFERED=1 timeout 70 python3 bench/peers.py --suite gemm_chains --peers eager --no-ceilings \
  --out "$out/peers.jsonl" --time-limit 50 > "$out/peers.log" 2>&1
echo "   eager rc $? records $(grep -c . "$out/peers.jsonl" 2>/dev/null) of 36 ($(left) s left)"
for dims in "128 5632 2048 2048" "128 8960 1536 1536"; do
  [ "$(left)" -gt 95 ] || { echo "   deadline: no peer kernels at $dims"; continue; }
  timeout 20 python3 bench/peer_kernels.py ffn $dims --peers eager --calls 3 >> "$out/peer-kernels.txt" 2>&1
done
grep -v "^ *$" "$out/peer-kernels.txt" 2>/dev/null | cut -c1-220
wait $compile_pid
echo "   compile: $(grep -c 'compiled in' "$out/compile.log") programs; errors: $(grep -ci 'error' "$out/compile.log") ($(left) s left)"
pack

echo "== 2. verify: solder run --backend cuda against float64 (background, niced) ($(left) s left)"
echo "$VERIFY" > "$out/verify-list.txt"
export S out
( OMP_NUM_THREADS=5 timeout 110 xargs -P 3 -L 1 nice -n 19 sh -c '
  IFS="|" read -r label env args <<EOF
$*
EOF
  if env $env timeout 100 $S run --backend cuda $args > "$out/run.$label.txt" 2>&1; then echo "verify $label: verified"
  else echo "verify $label: FAILED rc=$? $(tail -c 240 "$out/run.$label.txt" | tr "\n" " ")"; fi' _ < "$out/verify-list.txt" > "$out/verify.txt" ) &
verify_pid=$!

bench_line() {  # LABEL ENV ARGS...: one `solder bench`, its median / min / max appended to $out/$list
  local label=$1 env=$2; shift 2
  env $(envof "$env") timeout 20 $S bench "$@" --replays 30 --json > /tmp/s2-bench.json 2> /tmp/s2-bench.err
  us=$(tail -n 1 /tmp/s2-bench.json | python3 -c 'import json,sys
try: r = json.loads(sys.stdin.read()); print("%.2f %.2f %.2f" % (r["median_us"], r["min_us"], r["max_us"]))
except Exception: print("failed")')
  printf '%-36s %s\n' "$label" "$us" | tee -a "$out/$list"
  { echo "## $label | $env | $*"; cat /tmp/s2-bench.json /tmp/s2-bench.err; } >> "$out/bench-full.txt"
}

echo "== 3. sweep at S2 / S6: forced tiles, PDL for every skeleton kernel ($(left) s left)"
list=sweep.txt; : > "$out/$list"
while IFS='|' read -r label env args; do
  [ "$(left)" -gt 60 ] || { echo "   deadline: skipped $label" | tee -a "$out/$list"; continue; }
  bench_line "$label" "$env" $args
done <<< "$SWEEP"
pack

suite_cmds() {  # CASES-REGEX SUITE OUTFILE
  python3 bench/suites.py --suite "$2" --cases "$1" --solder-commands --solder "$S" --timeout 20 --out "$out/$3"
}
run_cmds() {  # MIN-SECONDS-LEFT: run stdin's command lines while that much time is left
  while IFS= read -r line; do
    [ "$(left)" -gt "$1" ] || { echo "$line" >> "$out/skipped.txt"; continue; }
    sh -c "$line" 2>> "$out/solder.err" || echo "   failed: $line"
  done
}
echo "== 4a. solder bench: gated_ffn S8, G1-G10 (never timed on this tree) ($(left) s left)"
suite_cmds '^gated_ffn-(S8|G[0-9]+)$' gemm_chains solder-suites.jsonl | run_cmds 35
echo "   records $(grep -c . "$out/solder-suites.jsonl" 2>/dev/null) ($(left) s left)"

echo "== 5. linear_relu_backward, nerf_mlp ($(left) s left)"
suite_cmds '^(linear_relu_backward|nerf_mlp)' contractions solder-contractions.jsonl | run_cmds 30
list=lrb.txt; : > "$out/$list"
while IFS='|' read -r label env args; do
  [ "$(left)" -gt 30 ] || { echo "   deadline: skipped $label" | tee -a "$out/$list"; continue; }
  bench_line "$label" "$env" $args
done <<< "$LRB"
pack

echo "== 4b. solder bench: the other gemm_chains cells ($(left) s left)"
suite_cmds '^(ffn-(S[134578]|G[0-9]+)|gated_ffn-S[13457])$' gemm_chains solder-suites.jsonl | run_cmds 12
echo "   records $(grep -c . "$out/solder-suites.jsonl") of 32 (S2 / S6 in the sweep); skipped $(grep -c . "$out/skipped.txt" 2>/dev/null) ($(left) s left)"
pack

echo "== 6. with time left: torch.compile of linear_relu_backward / nerf_mlp, the down projections alone ($(left) s left)"
[ "$(left)" -gt 40 ] && PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 bench/peers.py --suite contractions \
  --cases '^(linear_relu_backward|nerf_mlp)' --peers compile --no-ceilings --out "$out/peers-contractions.jsonl" \
  --time-limit $(( $(left) - 35 )) > "$out/peers-contractions.log" 2>&1
list=skinny.txt; : > "$out/$list"
while IFS='|' read -r label env dims; do
  [ "$(left)" -gt 6 ] || { echo "   deadline: skipped $label" >> "$out/$list"; continue; }
  bench_line "$label" "$env" bench/gemm/skinny.sol $dims
done <<< "$SKINNY"
while kill -0 "$verify_pid" 2>/dev/null && [ "$(left)" -gt 4 ]; do sleep 1; done
pack

echo "== summary ($(left) s left)"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
def rows(name):
    try:
        return [json.loads(l) for l in open(os.path.join(out, name)) if l.strip().startswith("{")]
    except OSError:
        return []
def key(r):
    d = r.get("dims") or r.get("overrides") or {}
    return (r.get("program") or r.get("workload"), tuple(sorted((k, int(v)) for k, v in d.items())))
peers = {}
for name in ("peers.jsonl", "peers-contractions.jsonl"):
    for r in rows(name):
        if r.get("median_us") and r.get("status", "ok") == "ok":
            peers.setdefault(key(r), {})[r.get("peer")] = r["median_us"]
print(f"{'case':44s} {'solder us':>10s} {'peer us':>10s} {'peer':>8s} {'ratio':>6s}")
for r in rows("solder-suites.jsonl") + rows("solder-contractions.jsonl"):
    k = key(r); ps = peers.get(k, {})
    peer = "eager" if "eager" in ps else "compile" if "compile" in ps else None
    p = ps.get(peer) if peer else None
    ratio = f"{r['median_us'] / p:6.3f}" if p and r.get("median_us") else "    - "
    dims = " ".join(f"{a}={b}" for a, b in k[1])
    print(f"{k[0] + ' ' + dims:44s} {r.get('median_us') or 0:10.2f} {p or 0:10.2f} {peer or '-':>8s} {ratio}")
print()
for name in ("sweep.txt", "lrb.txt", "skinny.txt", "verify.txt", "peer-kernels.txt"):
    print("--", name)
    try:
        for line in open(os.path.join(out, name)):
            print(line.rstrip())
    except OSError:
        pass
PY
cp "$out/summary.txt" "$O/summary.txt"
pack
echo "== done ($(left) s left)"
