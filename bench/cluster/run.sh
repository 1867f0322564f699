#!/usr/bin/env bash
# Builds and runs the cluster-collective microbenchmarks on a Hopper GPU. Writes the markdown tables and the
# planner's DSM table (JSON) to RESULTS_DIR (default: the build directory): bench_collectives
# (cluster-collectives.md, dsm-table.json) and bench_cf_config, ClusterFusion Table 1 in ClusterFusion's own
# configuration (cluster-cf-config.md).
# Usage: bench/cluster/run.sh [commit]   (CUDA=/usr/local/cuda, BUILD=build-cluster, RESULTS_DIR=$BUILD)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
BUILD=${BUILD:-$ROOT/build-cluster}
RESULTS_DIR=${RESULTS_DIR:-$BUILD}
COMMIT=${1:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$BUILD" "$RESULTS_DIR"
cd "$ROOT"
$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I"$ROOT/device" -I"$CUDA/include/cccl" \
  bench/cluster/bench_collectives.cu -o "$BUILD/bench_collectives"
timeout "${BENCH_TIMEOUT:-300}" "$BUILD/bench_collectives" --commit "$COMMIT" --markdown "$RESULTS_DIR/cluster-collectives.md" \
  --json "$RESULTS_DIR/dsm-table.json"
$CUDA/bin/nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -O3 -I"$ROOT/device" -I"$CUDA/include/cccl" \
  bench/cluster/bench_cf_config.cu -o "$BUILD/bench_cf_config"
timeout "${BENCH_TIMEOUT:-300}" "$BUILD/bench_cf_config" --commit "$COMMIT" --markdown "$RESULTS_DIR/cluster-cf-config.md"
