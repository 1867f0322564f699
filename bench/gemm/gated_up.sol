# gated_ffn's gate and up projections and their product alone (one paired, dual-B launch on the GEMM
# skeleton): h = silu(a · b1) · (a · b2), f16. Defaults: S1 (M 128, N 8192, K 3072).
# Used by bench/gemm_chains_dual.sh's tile sweep (SOLDER_GEMM_TILE).
program gated_up
dim M = 128, N = 8192, K = 3072
small M = 16, N = 64, K = 32
in a[M, K] : f16
in b1[K, N] : f16 ~ normal(0, 0.02)
in b2[K, N] : f16 ~ normal(0, 0.02)
gate[m, n] = sum(k) a[m, k] * b1[k, n]
up[m, n] = sum(k) a[m, k] * b2[k, n]
out h[m, n] : f16 = silu(gate[m, n]) * up[m, n]
