# census: (a @ b) @ d with the intermediate left f32
program chain_f32_mid
dim M = 512, N = 512, K = 512, L = 512
small M = 16, N = 32, K = 32, L = 32
in a[M, K] : bf16
in b[K, N] : bf16
in d[N, L] : bf16
h[m, n] = sum(k) a[m, k] * b[k, n]
out e[m, l] : bf16 = sum(n) h[m, n] * d[n, l]
