# Grouped-query attention: H query heads share HKV key/value heads; query head h reads KV head
# h // G with G = H // HKV query heads per group. Flashlight §4 GQA: 16 query heads, 2 KV heads,
# head dim 64, seq 1024 x batch 16 = 16k tokens.
program gqa
dim B = 16, H = 16, HKV = 2, G = H // HKV, S = 1024, D = 64
small B = 1, H = 4, HKV = 2, S = 64, D = 16
in q[B, H, S, D] : bf16
in k[B, HKV, S, D] : bf16
in v[B, HKV, S, D] : bf16
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h // G, j, d] * rsqrt(D)
m[b, h, i] = max(j) s[b, h, i, j]
e[b, h, i, j] = exp(s[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h // G, j, d]
