# The GEMM skeleton alone with B stored K-major (w[N, HID], the layout cuBLAS reads in torch.matmul(a,
# b.t())): bf16_rowscale_gemm.sol with the weight transposed, for the A/B of the two layouts at 8192^3
# (bench/suite15/skeleton_ab.sh, eighteenth session).
program bf16_rowscale_gemm_kmajor
dim T = 2048, HID = 4096, N = 6144
small T = 16, HID = 64, N = 32
in xn[T, HID] : bf16
in w[N, HID] : bf16 ~ normal(0, 0.02)
in r[T] : f32 ~ uniform(0.5, 2)
out y[t, n] : bf16 = sum(c) xn[t, c] * w[n, c] * r[t]
