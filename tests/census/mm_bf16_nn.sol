# census: a @ b, a [M,K], b [K,N], bf16
program mm_bf16_nn
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
