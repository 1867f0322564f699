# Gated FFN (SwiGLU), FlashFuser Fig. 1(c) / Fig. 8(b):  E = (silu(A . B1) * (A . B2)) . D.
# Two GEMM branches over the same A, combined elementwise, then the down projection.
# fp16 operands; the gated intermediate is fp16. Weights ~ normal(0, 0.02).
# Shapes: FlashFuser Table VII S1 (llama-3.2-3B, whose FFN is this SwiGLU): M 128, N 8192
# (intermediate), K 3072 (hidden), L 3072 (hidden).
program gated_ffn
dim M = 128, N = 8192, K = 3072, L = 3072
small M = 16, N = 64, K = 32, L = 32
in a[M, K] : f16
in b1[K, N] : f16 ~ normal(0, 0.02)
in b2[K, N] : f16 ~ normal(0, 0.02)
in d[N, L] : f16 ~ normal(0, 0.02)
gate[m, n] = sum(k) a[m, k] * b1[k, n]
up[m, n] = sum(k) a[m, k] * b2[k, n]
h[m, n] : f16 = silu(gate[m, n]) * up[m, n]
out e[m, l] : f16 = sum(n) h[m, n] * d[n, l]
