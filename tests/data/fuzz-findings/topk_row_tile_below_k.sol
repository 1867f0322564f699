# Found by the random-valid-program fuzzer (ProgramRandom, seeds 74, 97, 180, 193; fused with grid
# tiles of 1 or 2 rows), minimized.
#   solder run topk_row_tile_below_k.sol --backend cpu --tile-rows 1   internal error (exit 3): "CPU executor: kernel
#       't0', statement 3 (reduce): index 1 of dim 2 is out of the buffer's bounds (1)"
#   solder run topk_row_tile_below_k.sol --backend cpu                 verified
# Cause (fused lowering of topk, not the executor: the Kernel IR indexes past its own buffer): when the
# grid tile of the rows is smaller than k, the top-k buffer is sized by the tile but indexed by rank.
# Fixed (bdbd1e8): topk's rank dim is held whole by the planner. Regression test:
# FuzzFindings.TopkRowTileBelowK.
program topk_row_tile_below_k
dim M = 4, N = 16
in a0[M, N] : f32
out t0[n : N, r : 3] = topk(3, m : M) a0[m, n]
