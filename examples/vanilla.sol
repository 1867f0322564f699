# Vanilla multi-head attention: o = softmax(q k^T / sqrt(D)) v  (Flashlight Listing 1, Eq. 3).
# Shapes: Flashlight §4 MHA: 16 heads, head dim 64, batch x seq = 16k tokens (seq 1024, batch 16).
program vanilla
dim B = 16, H = 16, S = 1024, D = 64
small B = 1, H = 2, S = 64, D = 16
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
in v[B, H, S, D] : bf16
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)
m[b, h, i] = max(j) s[b, h, i, j]
e[b, h, i, j] = exp(s[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h, j, d]
