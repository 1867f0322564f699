# census: e4m3 a @ b, b [K,N]
program mm_e4m3_nn
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in b[K, N] : f8e4m3
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
