# FP8 per-token quantisation followed by an FP8 GEMM (RedFuser §3.4, Eq. 17):
#   amax[m] = max_k |a[m, k]|, scale[m] = amax[m] / 448 (448 = largest f8e4m3 value),
#   aq = a / scale rounded to f8e4m3, c = (sum_k aq . w) * scale.
# Eq. 17 writes c = sum_k (MAX * a / amax) * w and leaves out the fp8 rounding and the dequant
# scale; here both are written as a real FP8 pipeline has them. The weight w is already f8e4m3
# (its own per-tensor scale is taken as 1) and stored [N, K] (the nn.Linear layout, K contiguous:
# fp8 wgmma and torch._scaled_mm read both operands K-major). Note the rounding of aq makes the second reduction
# depend on amax non-multiplicatively: the exact one-pass (online) rewrite of Eq. 19 does not hold.
# Shapes: RedFuser Table 2(d) Q5 (DeepSeek-R1): M 4096, N 7168, K 2048.
program quant_gemm
dim M = 4096, N = 7168, K = 2048
small M = 16, N = 32, K = 64
in a[M, K] : bf16
in w[N, K] : f8e4m3
amax[m] = max(k) abs(a[m, k])
scale[m] = amax[m] / 448
aq[m, k] : f8e4m3 = a[m, k] / scale[m]
out c[m, n] : bf16 = sum(k) aq[m, k] * w[n, k] * scale[m]
