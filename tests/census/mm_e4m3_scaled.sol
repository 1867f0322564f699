# census: torch._scaled_mm(a, w.T, scale_a (row), scale_b (col))
program mm_e4m3_scaled
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in w[N, K] : f8e4m3
in sa[M] : f32 ~ uniform(0.5, 2)
in sb[N] : f32 ~ uniform(0.5, 2)
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] * sa[m] * sb[n]
