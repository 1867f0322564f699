# census: x @ w.T + bias in one expression
program epi_bias_inline
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in bias[N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] + bias[n]
