# An all-f32 torch.matmul of a [M, K] by b [Bt, K, N] (the one-operand batch) on 3xTF32: the split keeps the
# contract's sides (no operand exchange); the twenty-first session's final call verifies it.
program f32_batch_left
dim B = 16, M = 1024, N = 1024, K = 1024
small B = 2, M = 64, N = 64, K = 64
in a[M, K] : f32
in b[B, K, N] : f32
out c[i, m, n] : f32 = sum(k) a[m, k] * b[i, k, n]
