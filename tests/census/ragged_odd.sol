# census: a @ w.T at M 333, N 200, K 72
program ragged_odd
dim M = 333, N = 200, K = 72
small M = 17, N = 24, K = 24
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
