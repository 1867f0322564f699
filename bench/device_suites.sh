#!/usr/bin/env bash
# Benchmarks suites on the GPU machine, Solder and the peers in the same call, so each table row compares
# timings of one session on one GPU:
#
#   bench/device_suites.sh OUTDIR DEADLINE_S SUITE [SUITE...]      (SUITE: attention gemm_chains reductions decode contractions)
#
# For each suite: (1) every Solder case is compiled in parallel into the compile cache (`solder bench
# --compile-only`, one per core); (2) the peers run (bench/peers.py); (3) Solder's cases run one at a time
# (`solder bench --json`, each under a timeout). No new step starts after DEADLINE_S seconds from the
# start; the JSON lines accumulate in .cache/bench/ (ignored by git, kept while the machine stays warm),
# and a second call with the same arguments resumes where the first stopped. Everything is copied to
# OUTDIR at the end. Environment: SOLDER_COMMIT (stamped in every record), PEER_ARGS (extra peers.py
# options, e.g. "--quick"), SOLDER_ARGS (extra suites.py options, e.g. "--quick").
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  echo "usage: bench/device_suites.sh OUTDIR DEADLINE_S SUITE [SUITE...]" >&2
  exit 2
fi
out=$1; deadline=$2; shift 2
start=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - start) )); }
mkdir -p "$out" .cache/bench
commit=${SOLDER_COMMIT:-unknown}
export SOLDER_COMMIT=$commit
for suite in "$@"; do
  echo "== $suite: compile cache ($(nproc) in parallel), $(left) s left"
  python3 bench/suites.py --suite "$suite" ${SOLDER_ARGS:-} --solder-commands --compile-only --timeout 300 |
    xargs -d '\n' -P "$(nproc)" -n 1 sh -c 2>&1 | tail -n +1 > "$out/compile-$suite.log"
  grep -ci error "$out/compile-$suite.log" | sed 's/^/   compile errors: /'
  if [ "$(left)" -gt 30 ]; then
    echo "== $suite: peers, $(left) s left"
    timeout "$(left)" python3 bench/peers.py --suite "$suite" ${PEER_ARGS:-} --out ".cache/bench/peers-$suite.jsonl" \
      --resume --time-limit $(( $(left) - 60 > 30 ? $(left) - 60 : 30 )) --commit "$commit" 2>&1 | tail -n 40
  fi
  echo "== $suite: solder, $(left) s left"
  while IFS= read -r line; do
    if [ "$(left)" -lt 20 ]; then echo "   deadline: stopped before $line"; break; fi
    sh -c "$line" 2>> "$out/solder-$suite.err" || echo "   failed: $line"
  done < <(python3 bench/suites.py --suite "$suite" ${SOLDER_ARGS:-} --solder-commands --resume --timeout 150 \
             --out ".cache/bench/solder-$suite.jsonl")
  echo "   solder records: $(wc -l < ".cache/bench/solder-$suite.jsonl" 2>/dev/null || echo 0)"
  cp .cache/bench/*-"$suite".jsonl "$out/" 2>/dev/null
done
echo "== done, $(left) s left"
