#!/usr/bin/env bash
# Stages bench/attention/short_rows_call.sh's root on the build machine (no GPU): stripped build/solder,
# the attention device test as bin/test_sm90_attention (TEST_BIN: a prebuilt binary of the same device/
# and tests/gpu sources), examples/, bench/ (without results/), COMMIT, and the NVRTC cubins of every
# setting (compiled here with --compile-only into DEST/.cache/kernels: the call then compiles nothing).
#   SOLDER_CUTLASS_INCLUDE=<cute> TEST_BIN=<binary> bench/attention/short_rows_stage.sh DEST
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: short_rows_stage.sh DEST}
: "${TEST_BIN:?TEST_BIN names the device test binary}"
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin" "$dest/.cache/kernels"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
cp "$TEST_BIN" "$dest/bin/test_sm90_attention" && strip "$dest/bin/test_sm90_attention"
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
git log -1 --format='%h' > "$dest/COMMIT"
[ -n "${SEED_CACHE:-}" ] && cp "$SEED_CACHE"/*.cubin "$dest/.cache/kernels/" 2>/dev/null || true  # (cubins compiled earlier)
dims="--dim B=16 --dim S=1024 --dim D=64 --dim H=16"
grep -v '^\s*\(#\|$\)' bench/attention/short_rows.settings | while read -r tag envs; do
  [ "$envs" = - ] && envs=
  for ex in vanilla gqa; do
    env $envs SOLDER_CACHE_DIR="$dest/.cache/kernels" build/solder bench examples/$ex.sol $dims --compile-only
  done
done
du -sh "$dest"
