# Decode attention over a paged KV cache (vLLM's PagedAttention): the keys and values of every
# sequence live in fixed-size pages of a shared pool, and a block table maps a sequence's logical
# block j // BS to its physical page. Each load of k and v goes through the table: a load at a
# data-dependent index, checked when it runs (docs/language.md, "Data-dependent loads").
# One new query token per sequence, grouped-query heads (Llama-3-8B: 32 query heads, 8 KV heads,
# head dim 128), 8 sequences of 1024 cached tokens in pages of 16 tokens.
program paged_decode
dim B = 8, H = 32, HKV = 8, G = H // HKV, D = 128, BS = 16, NB = 64, KV = NB * BS, PAGES = B * NB
small B = 2, H = 4, HKV = 2, D = 16, BS = 4, NB = 4
in q[B, H, D] : f16
in k_pages[PAGES, BS, HKV, D] : f16
in v_pages[PAGES, BS, HKV, D] : f16
in table[B, NB] : i32 ~ randint(0, 8)     # page ids below the small pool's 8 pages, valid at both sizes
s[b, h, j : KV] = sum(d) q[b, h, d] * k_pages[table[b, j // BS], j % BS, h // G, d] * rsqrt(D)
m[b, h] = max(j) s[b, h, j]
e[b, h, j] = exp(s[b, h, j] - m[b, h])
z[b, h] = sum(j) e[b, h, j]
out o[b, h, d] : f16 = sum(j) e[b, h, j] / z[b, h] * v_pages[table[b, j // BS], j % BS, h // G, d]
