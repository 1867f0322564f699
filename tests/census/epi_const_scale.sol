# census: (q @ k.T) / sqrt(K)
program epi_const_scale
dim M = 512, N = 512, K = 128
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[n, k] * rsqrt(K)
