# census: einsum('bik,bjk->bij')
program bmm_bf16_nt
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, N, K] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, m, k] * b[i, n, k]
