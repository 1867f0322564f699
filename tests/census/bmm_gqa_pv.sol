# census: GQA p @ v: p [B,H,S,S], v [B,HKV,S,D]
program bmm_gqa_pv
dim B = 2, H = 8, HKV = 2, G = H // HKV, S = 256, D = 64
small B = 1, H = 4, HKV = 2, S = 32, D = 16
in p[B, H, S, S] : bf16
in v[B, HKV, S, D] : bf16
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h // G, j, d]
