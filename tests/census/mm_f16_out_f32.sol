# census: (a @ b).float(), f16 in, f32 out
program mm_f16_out_f32
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : f16
in b[K, N] : f16
out c[m, n] : f32 = sum(k) a[m, k] * b[k, n]
