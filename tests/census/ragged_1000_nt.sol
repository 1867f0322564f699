# census: x @ w.T at 1000^3
program ragged_1000_nt
dim M = 1000, N = 1000, K = 1000
small M = 17, N = 33, K = 35
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
