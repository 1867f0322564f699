# An all-f32 product whose A is a computed transposed view: tanh of x stored [K, M], times a weight stored
# [N, K]. The split evaluates tanh(x[k, m]) with consecutive threads along m (x's contiguous index), then
# writes the K-major parts (issue 15 item 2).
program f32_tanh_t
dim M = 4096, N = 4096, K = 4096
small M = 64, N = 64, K = 64
in x[K, M] : f32
in w[N, K] : f32
out c[m, n] : f32 = sum(k) tanh(x[k, m]) * w[n, k]
