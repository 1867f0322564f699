# census: (a @ b) * alpha
program epi_scalar_scale
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
in alpha : f32 ~ uniform(0.5, 2)
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n] * alpha
