#!/usr/bin/env bash
# Stages tf32's device call (bench/tf32/call.sh) into DEST: bench/merged_stage.sh's mini root (build/solder,
# DT's test_sm90_* as bin/, examples/, bench/, tests/gpu/, COMMIT), plus DT's bench_gemm as bin/bench_gemm.xz.
#   DT=/work/dt-tf32 bash bench/tf32/stage.sh /work/main/.devcarry/tf32
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:?usage: bench/tf32/stage.sh DEST}
bash bench/merged_stage.sh "$dest"
cp "${DT:-build-dt}/bench_gemm" "$dest/bin/bench_gemm" && strip "$dest/bin/bench_gemm" && xz -T2 -6 "$dest/bin/bench_gemm"
du -sh "$dest"
