# Found by the random-valid-program fuzzer (ProgramRandomLong, seed 8399: the one crash in 20,000
# programs), minimized.
#   solder run scalar_cascade_polynomial_crash.sol --backend cpu --tile-cols 8   SIGSEGV (exit 139)
#   solder run scalar_cascade_polynomial_crash.sol --backend cpu                 verified (one stream tile)
# Cause (fused lowering): a scalar (0-d) cascade whose second sum reads the first, t5 = Σ (a0 + t3 - 2),
# streamed over two or more tiles: GroupLowering::Translator::mutate (group_lowering.h:140) dereferences
# a null load while update_polynomial builds the online update. Likely the same bug as
# ../shared/reproducers/crash_scalar_variance.sol (variance of a whole vector, A >= 17).
# Fixed with ../reproducers/crash_scalar_variance.sol (7759436): a scalar tile is read at
# scalar_index(). Regression test: FuzzFindings.ScalarCascadePolynomialCrash.
program scalar_cascade_polynomial_crash
dim N = 16
in a0[N] : f32
out t3[] = sum(n : N) a0[n]
out t5[] = sum(n : N) (a0[n] + (t3 - 2.0))
