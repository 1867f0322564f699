# Llama-2-7B attention block, one decode step at batch 1 (ClusterFusion §3, Algorithm 3):
# QKV projection of the new token's hidden state, attention of the new query over the KV cache
# plus the new token's own key and value, and the output projection. fp16 throughout.
# The fused QKV weight [HID, 3 * H * D] is written [HID, 3, H, D] (same memory); the caches are
# [B, KV, H, D] (ClusterFusion: K_cache, V_cache in R^{s x H}). No RoPE (ClusterFusion's
# dataflow leaves it out too) and no write-back of the new k, v into the cache.
# Weights ~ normal(0, 0.02) keep fp16 activations in range at hidden 4096.
# Shapes: hidden 4096 = 32 heads x head dim 128, KV cache length 1024 (ClusterFusion sweeps 1k..16k).
program llama_decode
dim B = 1, H = 32, D = 128, HID = H * D, KV = 1024, KV1 = KV + 1
small B = 1, H = 4, D = 16, KV = 32
in x[B, HID] : f16
in wqkv[HID, 3, H, D] : f16 ~ normal(0, 0.02)
in k_cache[B, KV, H, D] : f16
in v_cache[B, KV, H, D] : f16
in wo[H, D, HID] : f16 ~ normal(0, 0.02)
q[b, h, d] : f16 = sum(c) x[b, c] * wqkv[c, 0, h, d]
k_new[b, h, d] : f16 = sum(c) x[b, c] * wqkv[c, 1, h, d]
v_new[b, h, d] : f16 = sum(c) x[b, c] * wqkv[c, 2, h, d]
# torch.cat([k_cache, k_new], dim=1): positions 0..KV-1 from the cache, position KV is the new token
kk[b, j : KV1, h, d] = select(j < KV, k_cache[b, j, h, d], k_new[b, h, d])
vv[b, j : KV1, h, d] = select(j < KV, v_cache[b, j, h, d], v_new[b, h, d])
s[b, h, j] = sum(d) q[b, h, d] * kk[b, j, h, d] * rsqrt(D)
m[b, h] = max(j) s[b, h, j]
e[b, h, j] = exp(s[b, h, j] - m[b, h])
z[b, h] = sum(j) e[b, h, j]
p[b, h, j] = e[b, h, j] / z[b, h]
a[b, h, d] : f16 = sum(j) p[b, h, j] * vv[b, j, h, d]
out y[b, c] : f16 = sum(h, d) a[b, h, d] * wo[h, d, c]
