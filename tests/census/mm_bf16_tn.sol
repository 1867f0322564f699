# census: a.T @ b, a [K,M], bf16
program mm_bf16_tn
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[k, m] * b[k, n]
