# census: x @ w.T, f16
program mm_f16_nt
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : f16
in w[N, K] : f16
out c[m, n] : f16 = sum(k) a[m, k] * w[n, k]
