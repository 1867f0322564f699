# census: a @ b with N 8
program ragged_n8
dim M = 1024, N = 8, K = 1024
small M = 16, N = 8, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
