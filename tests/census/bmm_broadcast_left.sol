# census: a @ b, a [M,K], b [B,K,N] (2-D by 3-D)
program bmm_broadcast_left
dim B = 4, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[m, k] * b[i, k, n]
