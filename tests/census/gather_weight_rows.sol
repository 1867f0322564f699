# census: x @ w[idx].T (selected weight rows, e.g. pruned heads)
program gather_weight_rows
dim M = 512, N = 256, K = 512, V = 1024
small M = 16, N = 32, K = 32, V = 64
in a[M, K] : bf16
in idx[N] : i32 ~ randint(0, 64)
in w[V, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[idx[n], k]
