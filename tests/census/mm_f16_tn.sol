# census: a.T @ b, a [K,M], f16
program mm_f16_tn
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : f16
in b[K, N] : f16
out c[m, n] : f16 = sum(k) a[k, m] * b[k, n]
