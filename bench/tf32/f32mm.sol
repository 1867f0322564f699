program f32mm
dim M = 4096, N = 4096, K = 4096
small M = 64, N = 64, K = 64
in a[M, K] : f32
in b[K, N] : f32
out c[m, n] : f32 = sum(k) a[m, k] * b[k, n]
