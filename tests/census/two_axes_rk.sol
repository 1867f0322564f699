# census: einsum('mrk,rkn->mn')
program two_axes_rk
dim M = 256, N = 256, K = 64, R = 8
small M = 16, N = 32, K = 8, R = 4
in a[M, R, K] : bf16
in b[R, K, N] : bf16
out c[m, n] : bf16 = sum(r, k) a[m, r, k] * b[r, k, n]
