# census: einsum('bmhd,bnhd->bmn') (heads summed)
program two_axes_batched
dim B = 4, M = 256, N = 256, H = 4, D = 64
small B = 2, M = 16, N = 32, H = 2, D = 8
in a[B, M, H, D] : bf16
in b[B, N, H, D] : bf16
out c[i, m, n] : bf16 = sum(h, d) a[i, m, h, d] * b[i, n, h, d]
