#!/usr/bin/env bash
# `solder run --backend cuda` of every line of the given files, each checked against the float64 reference:
#   bench/verify_lines.sh FILE...      (from a root holding build/solder; OUT=DIR for the logs, default /tmp/verify)
# A line is optional ENV=VALUE words (or "-" for none), then a program and its arguments; "#" lines and blank
# lines are skipped. PARALLEL runs at a time (default 3), each under VERIFY_SECONDS (default 60). Prints one
# "verified" or "FAILED (status)" line per run, with the error figures solder printed, into OUT/verify.txt too,
# then the count; exits 1 if any run failed. DRY_RUN=1 prints the commands only.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: bench/verify_lines.sh FILE..." >&2; exit 2; }
O=${OUT:-/tmp/verify}; mkdir -p "$O"; rm -f "$O"/verify-*.sh "$O"/verify-*.txt "$O/verify.txt"
n=0
for f in "$@"; do
  [ -r "$f" ] || { echo "verify_lines: cannot read $f" >&2; exit 2; }
  while read -r line; do
    envs=
    set -- $line
    [ "${1:-}" = - ] && shift
    while [ $# -gt 0 ] && [[ "$1" == *=* && "$1" != -* ]]; do envs="$envs $1"; shift; done
    n=$((n + 1))
    printf -v tag '%03d' "$n"
    echo "env$envs timeout ${VERIFY_SECONDS:-60} build/solder run --backend cuda $*" > "$O/verify-$tag.sh"
  done < <(grep -v '^\s*\(#\|$\)' "$f")
done
if [ "${DRY_RUN:-0}" = 1 ]; then cat "$O"/verify-*.sh; exit 0; fi
ls "$O"/verify-*.sh | xargs -P "${PARALLEL:-3}" -n 1 bash -c 'if bash "$0" > "${0%.sh}.txt" 2>&1; then
    echo "verified $(basename "$0"): $(cat "$0") $(grep -io "[^,;]*err[^,;]*" "${0%.sh}.txt" | head -2 | tr "\n" " ")"
  else echo "FAILED ($?) $(basename "$0"): $(cat "$0")"; fi' | tee "$O/verify.txt"
ok=$(grep -c '^verified' "$O/verify.txt"); echo "verify_lines: $ok of $n verified"
[ "$ok" = "$n" ]
