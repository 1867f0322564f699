# RMSNorm over the hidden dim followed by a projection:
#   y = (x * rsqrt(mean(x^2) + eps) * g) . W,  eps = 1e-5 (Llama-2 / Llama-3).
# No paper shape: a Llama-3-8B prefill of 2048 tokens, hidden 4096, into the fused QKV
# projection (32 + 2 x 8 heads of 128 = 6144 outputs). bf16 in and out; the normalised
# activations are left at the default f32 (the user does not round them).
program rmsnorm_gemm
dim T = 2048, HID = 4096, N = 6144
small T = 16, HID = 64, N = 32
in x[T, HID] : bf16
in g[HID] : bf16 ~ normal(1, 0.1)
in w[HID, N] : bf16 ~ normal(0, 0.02)
ms[t] = sum(c) x[t, c] * x[t, c] / HID
xn[t, c] = x[t, c] * rsqrt(ms[t] + 1e-5) * g[c]
out y[t, n] : bf16 = sum(c) xn[t, c] * w[c, n]
