# census: x @ w, x [B,S,K], w [K,N] (3-D by 2-D)
program bmm_broadcast_weight
dim B = 4, S = 256, N = 512, K = 512
small B = 2, S = 16, N = 32, K = 32
in x[B, S, K] : bf16
in w[K, N] : bf16
out c[i, s, n] : bf16 = sum(k) x[i, s, k] * w[k, n]
