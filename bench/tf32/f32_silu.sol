# An all-f32 product whose A is computed by a pointwise intermediate: silu of a bias-added input, times a
# weight stored [N, K] (torch's Linear). 3xTF32 with the split evaluating silu(x + bias) (issue 15 item 2).
program f32_silu
dim M = 4096, N = 4096, K = 4096
small M = 64, N = 64, K = 64
in x[M, K] : f32
in bias[K] : f32
in w[N, K] : f32
h[m, k] = silu(x[m, k] + bias[k])
out c[m, n] : f32 = sum(k) h[m, k] * w[n, k]
