# Found by the random-valid-program fuzzer (ProgramRandomLong, seeds 1477, 1534, 2201), minimized.
#   solder run topk_f16_running_values.sol --backend cpu --seed 2            MISMATCH: 1 integer element(s) differ
#   solder run topk_f16_running_values.sol --backend cpu --seed 2 --no-fuse  verified
# Cause (fused lowering): the running top-k values live in `register t0_tile[1, 1] : f16`, the target's
# dtype, so each candidate is compared with a running maximum already rounded to f16; a later element
# that rounds to the same f16 value but is smaller in f32 can win, or the first one lose. The reference
# selects on the exact values and rounds the result once. Same root cause as fused_bf16_accumulator.sol.
# Fixed: a top-k of a narrow dtype that loops over an inner dim now selects in an f32 tile and
# rounds the k values once after the loop, like looped sums (lower_fused_members.cpp, compute_member).
# Regression test: FuzzFindings.TopkF16RunningValues.
program topk_f16_running_values
dim M = 64, N = 129
in a0[M, N] : f32 ~ uniform(0.5, 1.5)
out t0[n : N, r : 1] : f16, out t1[n : N, r : 1] : i32 = topk(1, m : M) a0[m, n]
