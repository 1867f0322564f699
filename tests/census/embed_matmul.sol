# census: emb[tok] @ w.T (embedding then linear)
program embed_matmul
dim T = 512, V = 1000, C = 256, N = 512
small T = 16, V = 50, C = 32, N = 32
in tok[T] : i32 ~ randint(0, 50)
in emb[V, C] : bf16
in w[N, C] : bf16
x[t, c] = emb[tok[t], c]
out y[t, n] : bf16 = sum(c) x[t, c] * w[n, c]
