# RMSNorm then a projection, all in f32: the row scale rsqrt(ms + eps) applied after the dot product, the
# gain g[k] folded into A = x * g, whose split evaluates it (issue 15 item 2).
program f32_rmsnorm
dim M = 4096, N = 4096, K = 4096
small M = 64, N = 64, K = 64
in x[M, K] : f32
in g[K] : f32 ~ normal(1, 0.1)
in w[K, N] : f32
ms[m] = sum(c) x[m, c] * x[m, c] / K
xn[m, k] = x[m, k] * rsqrt(ms[m] + 1e-5) * g[k]
out y[m, n] : f32 = sum(k) xn[m, k] * w[k, n]
