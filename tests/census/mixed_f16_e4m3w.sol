# census: x.f16 @ w.e4m3 (fp8 weight-only)
program mixed_f16_e4m3w
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f16
in w[N, K] : f8e4m3
out c[m, n] : f16 = sum(k) a[m, k] * w[n, k]
