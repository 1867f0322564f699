# An all-f32 product whose A is computed: x scaled along K (x * s[k], a per-channel scale folded into the
# operand) times a weight stored [K, N]. 3xTF32 with the split evaluating x * s (issue 15 item 2).
program f32_scaled
dim M = 4096, N = 4096, K = 4096
small M = 64, N = 64, K = 64
in x[M, K] : f32
in s[K] : f32 ~ normal(1, 0.1)
in w[K, N] : f32
out c[m, n] : f32 = sum(k) x[m, k] * s[k] * w[k, n]
