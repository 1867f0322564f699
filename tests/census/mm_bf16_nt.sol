# census: x @ w.T (nn.Linear), w [N,K], bf16
program mm_bf16_nt
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
