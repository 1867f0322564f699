#!/usr/bin/env bash
# Unpacks a staged root's xz-compressed binaries (bench/merged_stage.sh: build/solder.xz, bin/*.xz) beside
# their .xz, once: a binary already unpacked is skipped. python3's lzma, since the device may lack xz.
# Run from the staged root: bash bench/unpack_staged.sh
set -uo pipefail
for z in build/*.xz bin/*.xz; do
  [ -f "$z" ] && [ ! -x "${z%.xz}" ] || continue
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "${z%.xz}" &&
    chmod +x "${z%.xz}"
done
exit 0
