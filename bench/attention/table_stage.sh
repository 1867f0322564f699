#!/usr/bin/env bash
# Stages bench/attention/table_call.sh's root on the build machine (no GPU) into DEST (default
# /work/main/.devcarry/attn-table, carried with .devcarry/cutlass): the stripped build/solder, examples/,
# bench/*.py, the call script, COMMIT, cells.txt (CELLS, default bench/attention/table.cells) and
# cmds.txt, their `solder bench --json` lines in that order (OUTFILE stands for the records' file).
# Also writes DEST/kernels.tsv: per cell, the SHA-256 of `solder emit --cuda` (the generated source) and
# the git tree of device/solder (the headers it includes), so that bench/attention/status.py can tell
# later whether a record ran the kernel of a given tree. Build first: cmake --build build --target solder.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${DEST:-/work/main/.devcarry/attn-table}
cells=${CELLS:-bench/attention/table.cells}
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bench/attention"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
cp -r examples "$dest/"
cp bench/*.py "$dest/bench/"
cp bench/attention/table_call.sh "$dest/bench/attention/"
git log -1 --format='%h' > "$dest/COMMIT"
grep -v '^\s*\(#\|$\)' "$cells" > "$dest/cells.txt"
tree=$(git rev-parse HEAD:device/solder)
: > "$dest/cmds.txt"; printf 'case\temit_sha256\tdevice_solder_tree\tcommit\n' > "$dest/kernels.tsv"
while read -r id; do
  line=$(python3 bench/suites.py --suite attention --cases "^$id\$" --solder-commands --timeout 40 --out OUTFILE)
  [ -n "$line" ] || { echo "table_stage: no suite case $id" >&2; exit 1; }
  echo "$line" >> "$dest/cmds.txt"
  args=$(echo "$line" | sed 's/^timeout [0-9]* build\/solder bench //; s/ --json >>.*//')
  sha=$(eval build/solder emit $args --cuda | sha256sum | cut -c1-16)
  printf '%s\t%s\t%s\t%s\n' "$id" "$sha" "$tree" "$(cat "$dest/COMMIT")" >> "$dest/kernels.tsv"
done < "$dest/cells.txt"
du -sh "$dest"
