# gather-copy (issue 15, twenty-second session): the census's embed_matmul (emb[tok] @ w.T, embedding then
# linear) at an LLM-like size, token ids drawn over the whole vocabulary (the census program draws them
# below its small V, 50 rows: a table L2 holds)
program embed_llm
dim T = 4096, V = 32000, C = 4096, N = 4096
small T = 16, V = 32000, C = 32, N = 32
in tok[T] : i32 ~ randint(0, 32000)
in emb[V, C] : bf16
in w[N, C] : bf16
x[t, c] = emb[tok[t], c]
out y[t, n] : bf16 = sum(c) x[t, c] * w[n, c]
