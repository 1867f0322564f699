# census: einsum('bhqd,bhkd->bhqk') (scores, no softmax)
program bmm_heads
dim B = 2, H = 8, S = 256, D = 64
small B = 1, H = 2, S = 32, D = 16
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
out s[b, h, i, j] : bf16 = sum(d) q[b, h, i, d] * k[b, h, j, d]
