# census: torch.bmm(a, b), a [B,M,K], b [B,K,N]
program bmm_bf16
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, m, k] * b[i, k, n]
