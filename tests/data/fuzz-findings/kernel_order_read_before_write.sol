# Found by the random-valid-program fuzzer (ProgramRandomLong, seed 1634), minimized.
#   solder run kernel_order_read_before_write.sol --backend cpu            internal error (exit 3): "Kernel IR
#       verifier: kernel 't2', statement 1 (copy): global 't0' is read before any kernel writes it"
#   solder run kernel_order_read_before_write.sol --backend cpu --no-fuse  verified
# Cause (fusion grouping / kernel order): t0 is an output computed in one kernel and read by t2, whose
# kernel is emitted first.
# Fixed: the group {t0, t1, t2, t5} was planned with a split stream, and its costly pre-phase
# reduction t2 moved to a kernel of its own before the rest; t2 reads t0, which stayed behind. The
# moved set now takes the members it reads along (fuse.cpp, costly_pre_members). Regression test:
# FuzzFindings.KernelOrderReadBeforeWrite.
program kernel_order_read_before_write
dim B = 2, M = 1, N = 64, K = 64
in a0[B, M, K] : bf16
in a1[B, M, K] : bf16 ~ uniform(-1, 1)
in a2[B, M, N, K] : f32 ~ uniform(0.5, 1.5)
in a3[K] : f32
in a6[B, M, K] : f32 ~ uniform(0.5, 1.5)
out t0[b : B, m : M, k : K] = (a0[b, m, k] + (a1[b, m, k] - (a1[b, m, k] - a0[b, m, k])))
t1[b : B, n : N, k : K] = sum(m : M) (a2[b, m, n, k] - (m / M)) / M
t2[m : M, k : K] : f16 = sum(b : B) (t0[b, m, k] * (0.5 * a3[k])) / B
t5[b : B, m : M, n : N] = sum(k : K) a6[b, m, k] * t1[b, n, k] / K
