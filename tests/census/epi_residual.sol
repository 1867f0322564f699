# census: x @ w.T + residual
program epi_residual
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in res[M, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] + res[m, n]
