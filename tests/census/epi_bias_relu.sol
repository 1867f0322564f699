# census: relu(F.linear(x, w, bias))
program epi_bias_relu
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in bias[N] : bf16
y[m, n] = sum(k) a[m, k] * w[n, k]
out c[m, n] : bf16 = max(y[m, n] + bias[n], 0)
