# census: x @ w with 16 rows, w [K,N]
program decode_m16_nn
dim M = 16, N = 4096, K = 4096
small M = 16, N = 64, K = 64
in a[M, K] : bf16
in w[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[k, n]
