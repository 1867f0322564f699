# Document-mask attention (packed sequences): query i sees key j only when both tokens belong to
# the same document. Document ids are an input, non-decreasing along the sequence, drawn from
# 12 documents (Flashlight §4). Bidirectional inside a document (no causal part).
# Shapes: Flashlight §4 MHA (16 heads, head dim 64, seq 1024 x batch 16 = 16k tokens).
program document_mask
dim B = 16, H = 16, S = 1024, D = 64
small B = 1, H = 2, S = 64, D = 16
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
in v[B, H, S, D] : bf16
in doc[B, S] : i32 ~ sorted_randint(0, 12)
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)
sm[b, h, i, j] = select(doc[b, i] == doc[b, j], s[b, h, i, j], -inf)
m[b, h, i] = max(j) sm[b, h, i, j]
e[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h, j, d]
