# census: x @ w.to(bf16), w f32 cast explicitly
program mixed_cast_bf16
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : f32
out c[m, n] : bf16 = sum(k) a[m, k] * cast(w[n, k], bf16)
