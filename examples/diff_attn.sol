# Differential attention (Ye et al.), as in Flashlight Listing 4:
#   q0, q1 = q.chunk(2, dim=1); k0, k1 = k.chunk(2, dim=1)
#   out = attention(q0, k0, v) - lambda * attention(q1, k1, v)
# chunk(2, dim=1) of a [B, 2H, S, D] tensor is written here as the same memory viewed as
# [B, 2, H, S, D]: q[b, 0, h, ...] is the first half of the heads, q[b, 1, h, ...] the second.
# v is shared by both attentions and has H heads (Listing 4 passes the unsplit v to both calls).
# lambda is a 0-d input (Listing 4 uses 0.2; here drawn from uniform(0.1, 0.9)).
# Shapes: Flashlight §4: as the MHA variants, 16 query/key heads (2 x H = 8), head dim 64,
# seq 1024 x batch 16; Flashlight also runs head dim 128 (--dim D=128).
program diff_attn
dim B = 16, H = 8, S = 1024, D = 64
small B = 1, H = 2, S = 64, D = 16
in q[B, 2, H, S, D] : bf16
in k[B, 2, H, S, D] : bf16
in v[B, H, S, D] : bf16
in lam : f32 ~ uniform(0.1, 0.9)
s0[b, h, i, j] = sum(d) q[b, 0, h, i, d] * k[b, 0, h, j, d] * rsqrt(D)
m0[b, h, i] = max(j) s0[b, h, i, j]
e0[b, h, i, j] = exp(s0[b, h, i, j] - m0[b, h, i])
z0[b, h, i] = sum(j) e0[b, h, i, j]
p0[b, h, i, j] = e0[b, h, i, j] / z0[b, h, i]
a0[b, h, i, d] = sum(j) p0[b, h, i, j] * v[b, h, j, d]
s1[b, h, i, j] = sum(d) q[b, 1, h, i, d] * k[b, 1, h, j, d] * rsqrt(D)
m1[b, h, i] = max(j) s1[b, h, i, j]
e1[b, h, i, j] = exp(s1[b, h, i, j] - m1[b, h, i])
z1[b, h, i] = sum(j) e1[b, h, i, j]
p1[b, h, i, j] = e1[b, h, i, j] / z1[b, h, i]
a1[b, h, i, d] = sum(j) p1[b, h, i, j] * v[b, h, j, d]
out o[b, h, i, d] : bf16 = a0[b, h, i, d] - lam * a1[b, h, i, d]
