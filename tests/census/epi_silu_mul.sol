# census: silu(x @ wg.T) * (x @ wu.T) (gated MLP up)
program epi_silu_mul
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in wg[N, K] : bf16
in wu[N, K] : bf16
g[m, n] = sum(k) a[m, k] * wg[n, k]
u[m, n] = sum(k) a[m, k] * wu[n, k]
out c[m, n] : bf16 = silu(g[m, n]) * u[m, n]
