# Standard FFN, a two-GEMM chain (FlashFuser Fig. 1(b) / Fig. 8(a)):  E = act(A . B) . D.
# FlashFuser names M, N, K, L as GEMM1 = [M, K] x [K, N], GEMM2 = [M, N] x [N, L]. The paper
# has an activation between the GEMMs (pruning Rule 3) but does not name it; we use GELU (tanh
# approximation), the activation of the standard FFNs of GPT-2 and BERT in its Table VI.
# fp16 operands; the intermediate is fp16, as it is materialised between the two GEMMs.
# Weights ~ normal(0, 0.02) keep fp16 values in range.
# Shapes: FlashFuser Table VII S1 (llama-3.2-3B): M 128, N 8192, K 3072, L 3072.
program ffn
dim M = 128, N = 8192, K = 3072, L = 3072
small M = 16, N = 64, K = 32, L = 32
in a[M, K] : f16
in b[K, N] : f16 ~ normal(0, 0.02)
in d[N, L] : f16 ~ normal(0, 0.02)
c[m, n] = sum(k) a[m, k] * b[k, n]
h[m, n] : f16 = gelu(c[m, n])
out e[m, l] : f16 = sum(n) h[m, n] * d[n, l]
