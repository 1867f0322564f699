# rmsnorm_gemm's GEMM alone (issue 15, sixth session): normalised rows already rounded to bf16, the
# bf16 weight [HID, N] and rsqrt(ms + eps) as a per-row factor after the dot, on the plain sm_90a
# skeleton: what a two-kernel rmsnorm_gemm would run after its memory-bound pass. L1 shape; L2 is
# --dim T=4096 --dim HID=4096 --dim N=14336.
program bf16_rowscale_gemm
dim T = 2048, HID = 4096, N = 6144
small T = 16, HID = 64, N = 32
in xn[T, HID] : bf16
in w[HID, N] : bf16 ~ normal(0, 0.02)
in r[T] : f32 ~ uniform(0.5, 2)
out y[t, n] : bf16 = sum(c) xn[t, c] * w[c, n] * r[t]
