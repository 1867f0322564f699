# census: a.bf16 @ b.f16 (promoted)
program mixed_bf16_f16
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : f16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
