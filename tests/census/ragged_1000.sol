# census: a @ b at 1000^3
program ragged_1000
dim M = 1000, N = 1000, K = 1000
small M = 17, N = 33, K = 35
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
