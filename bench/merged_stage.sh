#!/usr/bin/env bash
# Stages bench/merged_call.sh's mini repository root on the build machine (no GPU): stripped build/solder,
# the device tests as bin/test_sm90_*, examples/, bench/ (without results/), tests/gpu/ and COMMIT.
#   bench/merged_stage.sh DEST          (e.g. .devcarry/merged; carried with .devcarry/cutlass)
# Needs build/solder (cmake; rebuild it after editing a .cuh: the headers are embedded) and the device
# tests built with OUT_BIN=1, e.g.
#   OUT_BIN=1 BUILD=build-dt SOLDER_CUTLASS_INCLUDE=$PWD/.devcarry/cutlass \
#     bash tests/gpu/attention_skeleton/compile_check.sh test      (also: dual; tests/gpu/gemm: test)
# DT names that folder (default build-dt). The binaries are xz-compressed (XZ=0 keeps them plain), and a
# libgomp.so.1 the device tests link goes into bin/: the carry's 64 MiB limit holds main's tracked files
# (~30 MB) and the CuTe headers (~27 MB), so the staged folder must stay under ~8 MB; merged_call.sh
# unpacks them on the device. The call then runs, with ../cutlass beside the root:
#   cd .devcarry/merged && SPOTS=bench/merged_sNN.spots DEADLINE=440 bash bench/merged_call.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: bench/merged_stage.sh DEST}
rm -rf "$dest"; mkdir -p "$dest/build" "$dest/bin" "$dest/tests"
cp build/solder "$dest/build/solder" && strip "$dest/build/solder"
found=0
for t in "${DT:-build-dt}"/test_sm90_*; do
  [ -x "$t" ] || continue
  cp "$t" "$dest/bin/" && strip "$dest/bin/$(basename "$t")"; found=$((found + 1))
done
[ "$found" -gt 0 ] || echo "merged_stage: no device tests in ${DT:-build-dt}/ (the call's step 1 will fail)" >&2
cp -r examples "$dest/"
tar cf - --exclude=bench/results bench | tar xf - -C "$dest"
cp -r tests/gpu "$dest/tests/"
git log -1 --format='%h' > "$dest/COMMIT"
for t in "$dest"/bin/test_sm90_*; do     # the OpenMP runtime the host references link, absent on the device
  [ -x "$t" ] || continue
  gomp=$(ldd "$t" | awk '/libgomp/ { print $3; exit }')
  [ -n "$gomp" ] && cp -L "$gomp" "$dest/bin/" && break
done
if [ "${XZ:-1}" = 1 ]; then
  for b in "$dest"/build/solder "$dest"/bin/test_sm90_*; do [ -f "$b" ] && xz -T2 -6 "$b"; done
fi
du -sh "$dest"
