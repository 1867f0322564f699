# census: gelu(a @ b)
program epi_gelu
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
y[m, n] = sum(k) a[m, k] * b[k, n]
out c[m, n] : bf16 = gelu(y[m, n])
