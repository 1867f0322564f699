# census: relu(x @ w1.T) @ w2.T
program chain_mlp
dim M = 512, N = 1024, K = 256, L = 256
small M = 16, N = 32, K = 32, L = 32
in a[M, K] : bf16
in w1[N, K] : bf16
in w2[L, N] : bf16
h[m, n] : bf16 = max(sum(k) a[m, k] * w1[n, k], 0)
out e[m, l] : bf16 = sum(n) h[m, n] * w2[l, n]
