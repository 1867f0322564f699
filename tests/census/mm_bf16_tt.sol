# census: a.T @ b.T, a [K,M], b [N,K], bf16
program mm_bf16_tt
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : bf16
in b[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[k, m] * b[n, k]
