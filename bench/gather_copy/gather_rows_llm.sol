# gather-copy (issue 15, twenty-second session): the census's gather_weight_rows (x @ w[idx].T, selected
# weight rows) at an LLM-like size, row ids drawn over the whole table of V rows
program gather_rows_llm
dim M = 4096, N = 11008, K = 4096, V = 32000
small M = 16, N = 32, K = 32, V = 32000
in a[M, K] : bf16
in idx[N] : i32 ~ randint(0, 32000)
in w[V, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[idx[n], k]
