# census: einsum('mkr,krn->mn')
program two_axes_mkr
dim M = 256, N = 256, K = 32, R = 16
small M = 16, N = 32, K = 8, R = 4
in a[M, K, R] : bf16
in b[K, R, N] : bf16
out c[m, n] : bf16 = sum(k, r) a[m, k, r] * b[k, r, n]
