# census: x @ w.T with 16 rows
program decode_m16
dim M = 16, N = 4096, K = 4096
small M = 16, N = 64, K = 64
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
