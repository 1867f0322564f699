# Found by the random-valid-program fuzzer (ProgramRandomLong, seed 1845; 19 of 20 similar internal
# errors in the first 3000 programs involve a top-k), minimized.
#   solder run topk_unused_values.sol --backend cpu              internal error (exit 3): "Kernel IR verifier:
#       kernel 't0', ...: 't0' is neither a buffer of this kernel nor a global tensor"
#   solder run topk_unused_values.sol --backend cpu --no-fuse    verified
# Cause (fused lowering): the top-k's values are neither an output nor read by anything, only its indices
# are an output; the fused kernel still copies the values out to a global that does not exist. The
# mirror image of ../shared/reproducers/ice_topk_unused_indices.sol (indices unused).
# Fixed (39185bc): only the results of a topk that leave its kernel are stored. Regression test:
# FuzzFindings.TopkUnusedValues.
program topk_unused_values
dim B = 3, M = 2, N = 16, K = 17
in a0[B, M, N, K] : f32 ~ uniform(0.5, 1.5)
t0[b : B, m : M, n : N, r : 4], out t1[b : B, m : M, n : N, r : 4] : i32 = topk(4, k : K) a0[b, m, n, k]
