# census: a @ b with K 100
program ragged_k100
dim M = 1024, N = 1024, K = 100
small M = 16, N = 32, K = 20
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
