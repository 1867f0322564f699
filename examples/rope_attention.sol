# Llama-style causal attention with rotary position embeddings (RoPE, Su et al. 2021) on q and k,
# written as Hugging Face's Llama writes it: rotate_half (the first and second halves of the head
# dim form the pairs), the angle of position t at frequency f is t * theta^(-2f/D), theta = 10000,
# and cos / sin of that angle multiply q and k before the scores. Grouped-query heads as gqa.sol.
# Llama-3-8B shape: 32 query heads, 8 KV heads, head dim 128.
program rope_attention
dim B = 2, H = 32, HKV = 8, G = H // HKV, S = 1024, D = 128, D2 = D // 2
small B = 1, H = 4, HKV = 2, S = 32, D = 16
in q[B, H, S, D] : bf16
in k[B, HKV, S, D] : bf16
in v[B, HKV, S, D] : bf16
qr[b, h, i, d] = q[b, h, i, d] * cos(i * pow(10000.0, -2.0 * (d % D2) / D)) +
                 select(d < D2, -q[b, h, i, d + D2], q[b, h, i, d - D2]) * sin(i * pow(10000.0, -2.0 * (d % D2) / D))
kr[b, g, j, d] = k[b, g, j, d] * cos(j * pow(10000.0, -2.0 * (d % D2) / D)) +
                 select(d < D2, -k[b, g, j, d + D2], k[b, g, j, d - D2]) * sin(j * pow(10000.0, -2.0 * (d % D2) / D))
s[b, h, i, j] = sum(d) qr[b, h, i, d] * kr[b, h // G, j, d] * rsqrt(D)
sm[b, h, i, j] = select(j <= i, s[b, h, i, j], -inf)
m[b, h, i] = max(j) sm[b, h, i, j]
e[b, h, i, j] = exp(sm[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h // G, j, d]
