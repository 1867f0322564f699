# Found by the random-valid-program fuzzer (ProgramRandomLong, seeds 11779, 13557), minimized.
#   solder run tile_read_before_written.sol --backend cpu --tile-cols 8 --tile-rows 2   internal error (exit 3):
#       "Kernel IR verifier: kernel 'fused_t4', ...: buffer 't2_tile' is read before it is written"
#   solder run tile_read_before_written.sol --backend cpu                                verified
# Cause (fused lowering): the scalar t2 = min over the 1-element dim N of t1 is read (through t3) inside
# t4's contraction loop before the fused kernel has computed it, when the rows are tiled by 2 and the
# stream by 8.
# Fixed: t4 (a reduction over the stream m) read t2, a post-phase member (final only after
# the loop); the planner did not check that order. It now refuses to stream such a group with the
# rule "t4 reduces over the streamed dim but reads t2, which is final only after the loop" and
# holds m whole (group_plan.cpp, assign_phases). Regression tests: FuzzFindings.TileReadBeforeWritten,
# GroupPlan.StreamsThatWouldReadUnfinishedResultsAreRefused.
program tile_read_before_written
dim M = 16, N = 1, K = 129
in a0[N, K] : f32 ~ uniform(0.5, 1.5)
in a1[M, N] : f32
in a2[M, N] : f32 ~ uniform(-1, 1)
t0[m : M, k : K] = sum(n : N) a0[n, k] * a1[m, n]
t1[n : N] = min(m : M) a2[m, n]
t2[] = min(n : N) t1[n]
t3[m : M, k : K] : f16 = (t0[m, k] * t2)
out t4[n : N, k : K] = sum(m : M) a2[m, n] * t3[m, k] / M
