# census: GQA scores: q [B,H,S,D], k [B,HKV,S,D], head h reads h // G
program bmm_gqa
dim B = 2, H = 8, HKV = 2, G = H // HKV, S = 256, D = 64
small B = 1, H = 4, HKV = 2, S = 32, D = 16
in q[B, H, S, D] : bf16
in k[B, HKV, S, D] : bf16
out s[b, h, i, j] : bf16 = sum(d) q[b, h, i, d] * k[b, h // G, j, d]
