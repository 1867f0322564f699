# census: (a @ b).T stored
program out_transposed
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[n, m] : bf16 = sum(k) a[m, k] * b[k, n]
