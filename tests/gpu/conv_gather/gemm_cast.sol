# An operand that is not a tree of selects over loads (a cast of a product): the gathered writer
# evaluates it element by element as written (64-bit indices), still two-phase. Ragged M, N, K.
program gemm_cast
dim M = 200, N = 96, K = 63
in a[M, K] : bf16
in b[K, N] : bf16
out y[m, n] : bf16 = sum(k) cast(a[m, k] * 2, bf16) * b[k, n]
