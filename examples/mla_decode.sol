# Multi-head latent attention (DeepSeek MLA), absorbed form, one decode step (query length 1):
# W_UK is absorbed into the query, so each head's query lives in the latent space (kv_lora_rank
# DC = 512) plus the decoupled RoPE part (DR = 64). All heads share one compressed KV cache:
# the latent ckv (which also serves as the values) and the RoPE keys k_pe.
#   s = (q_nope . ckv + q_pe . k_pe) / sqrt(DQK),  o = softmax_j(s) . ckv
# The output stays in the latent space (W_UV is applied afterwards, outside this program).
# Softmax scale: DeepSeek keeps the pre-absorption q/k head dim, 128 (nope) + 64 (rope) = 192.
# Shapes: RedFuser Table 2(b) L1: batch 32, 128 heads, KV 1024, latent 512, rope 64
# (L4..L9: --dim B=16 / B=1, KV=2048 / 4096). DeepSeek-V2-Lite itself has 16 heads
# (ClusterFusion): --dim H=16.
program mla_decode
dim B = 32, H = 128, KV = 1024, DC = 512, DR = 64, DQK = 192
small B = 2, H = 4, KV = 32, DC = 32, DR = 8
in q_nope[B, H, DC] : bf16
in q_pe[B, H, DR] : bf16
in ckv[B, KV, DC] : bf16
in k_pe[B, KV, DR] : bf16
s_nope[b, h, j] = sum(c) q_nope[b, h, c] * ckv[b, j, c]
s_pe[b, h, j] = sum(r) q_pe[b, h, r] * k_pe[b, j, r]
s[b, h, j] = (s_nope[b, h, j] + s_pe[b, h, j]) * rsqrt(DQK)
m[b, h] = max(j) s[b, h, j]
e[b, h, j] = exp(s[b, h, j] - m[b, h])
z[b, h] = sum(j) e[b, h, j]
p[b, h, j] = e[b, h, j] / z[b, h]
out o[b, h, c] : bf16 = sum(j) p[b, h, j] * ckv[b, j, c]
