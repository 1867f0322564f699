# llama_decode's attention alone, its output `a` checked directly (bench/decode_attn_call.sh): the new
# token's q, k_new, v_new as inputs, the caches concatenated with the new token's k / v by select(j < KV,
# ...). q ~ normal(0, 3) makes the scores peaked (s ~ N(0, 9)), so that a dropped or misplaced key moves
# the output by more than the tolerance where it carries weight.
program decode_attention
dim B = 1, H = 32, D = 128, KV = 1024, KV1 = KV + 1
small B = 1, H = 4, D = 16, KV = 300
in q[B, H, D] : f16 ~ normal(0, 3)
in k_new[B, H, D] : f16
in v_new[B, H, D] : f16
in k_cache[B, KV, H, D] : f16
in v_cache[B, KV, H, D] : f16
kk[b, j : KV1, h, d] = select(j < KV, k_cache[b, j, h, d], k_new[b, h, d])
vv[b, j : KV1, h, d] = select(j < KV, v_cache[b, j, h, d], v_new[b, h, d])
s[b, h, j] = sum(d) q[b, h, d] * kk[b, j, h, d] * rsqrt(D)
m[b, h] = max(j) s[b, h, j]
e[b, h, j] = exp(s[b, h, j] - m[b, h])
z[b, h] = sum(j) e[b, h, j]
p[b, h, j] = e[b, h, j] / z[b, h]
out a[b, h, d] : f16 = sum(j) p[b, h, j] * vv[b, j, h, d]
