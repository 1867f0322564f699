# Token embedding lookup followed by RMSNorm (the first layer of a Llama): each token id selects a
# row of the embedding table, a load at a data-dependent index, and the row is normalised with its
# root mean square, written as one statement with the reduction inside the expression.
# Llama-3-8B: vocabulary 128256, hidden 4096; a prefill of 2048 tokens.
program embedding
dim T = 2048, V = 128256, HID = 4096
small T = 16, V = 50, HID = 32
in tok[T] : i32 ~ randint(0, 50)      # token ids below the small V, so both size sets can run it
in emb[V, HID] : bf16
in g[HID] : bf16 ~ normal(1, 0.1)
x[t, c] = emb[tok[t], c]
out y[t, c] : bf16 = x[t, c] * rsqrt(sum(l) x[t, l] * x[t, l] / HID + 1e-5) * g[c]
