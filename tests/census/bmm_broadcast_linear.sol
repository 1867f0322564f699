# census: nn.Linear on [B,S,K], w [N,K]
program bmm_broadcast_linear
dim B = 4, S = 256, N = 512, K = 512
small B = 2, S = 16, N = 32, K = 32
in x[B, S, K] : bf16
in w[N, K] : bf16
out c[i, s, n] : bf16 = sum(k) x[i, s, k] * w[n, k]
