# census: einsum('bki,bkj->bij')
program bmm_bf16_tn
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, K, M] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, k, m] * b[i, k, n]
