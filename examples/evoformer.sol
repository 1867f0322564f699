# AlphaFold Evoformer: MSA row-wise gated self-attention with pair bias (AlphaFold 2 supplement,
# Algorithm 7), the attention part as Flashlight §4 benchmarks it. Inputs are already projected:
# q, k, v and the gate logits g per head (the Linear layers of m are left out), laid out
# [batch, MSA row r (S1), head, residue (S2), head dim].
#   s = q k^T / sqrt(D) + pair_bias[b, h, i, j]            (broadcast along the MSA rows r)
#                       + mask bias 1e9 * (mask[b, r, j] - 1)  (OpenFold's finite mask bias,
#                                                              broadcast along heads and queries)
#   o = sigmoid(g) * softmax_j(s) v
# These are Flashlight's "two bias matrices before softmax, one broadcast along the extra dim".
# Shapes: Flashlight §4: batch 1 (1..32), both sequence dims 256, 4 heads, head dim 64 (and 128).
program evoformer
dim B = 1, S1 = 256, S2 = 256, H = 4, D = 64
small B = 1, S1 = 4, S2 = 16, H = 2, D = 8
in q[B, S1, H, S2, D] : bf16
in k[B, S1, H, S2, D] : bf16
in v[B, S1, H, S2, D] : bf16
in g[B, S1, H, S2, D] : bf16
in pair_bias[B, H, S2, S2] : bf16
in mask[B, S1, S2] : bool ~ bernoulli(0.9)
s[b, r, h, i, j] = sum(d) q[b, r, h, i, d] * k[b, r, h, j, d] * rsqrt(D)
sb[b, r, h, i, j] = s[b, r, h, i, j] + pair_bias[b, h, i, j] + 1e9 * (mask[b, r, j] - 1)
m[b, r, h, i] = max(j) sb[b, r, h, i, j]
e[b, r, h, i, j] = exp(sb[b, r, h, i, j] - m[b, r, h, i])
z[b, r, h, i] = sum(j) e[b, r, h, i, j]
p[b, r, h, i, j] = e[b, r, h, i, j] / z[b, r, h, i]
a[b, r, h, i, d] = sum(j) p[b, r, h, i, j] * v[b, r, h, j, d]
out o[b, r, h, i, d] : bf16 = sigmoid(g[b, r, h, i, d]) * a[b, r, h, i, d]
