# One M = 128 product as the gemm_chains suite's down projections store it: h [M, K] (K-major) times
# d [K, N] (N-major), f16. Defaults: ffn / gated_ffn S1's e (M 128, N = L 3072, K = N 8192).
# Used by bench/gemm_chains_dual.sh's tile sweep (SOLDER_GEMM_TILE).
program skinny
dim M = 128, N = 3072, K = 8192
small M = 16, N = 64, K = 32
in h[M, K] : f16
in d[K, N] : f16 ~ normal(0, 0.02)
out e[m, n] : f16 = sum(k) h[m, k] * d[k, n]
