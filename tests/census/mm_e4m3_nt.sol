# census: torch._scaled_mm(a, w.T), e4m3, w [N,K]
program mm_e4m3_nt
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in w[N, K] : f8e4m3
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
