# census: (a @ b) * r[:, None] * s[None, :]
program epi_row_col_scale
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
in r[M] : f32
in s[N] : f32
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n] * r[m] * s[n]
