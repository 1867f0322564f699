# census: einsum('bmk,bkn->bnm')
program out_transposed_batched
dim B = 4, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, K, N] : bf16
out c[i, n, m] : bf16 = sum(k) a[i, m, k] * b[i, k, n]
