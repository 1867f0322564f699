# FP8 attention: o = softmax(q k^T / sqrt(D)) v with q, k and v stored f8e4m3 and o in bf16, as an FP8
# inference pipeline runs the attention of a quantised model (FlashAttention-3's fp8 path, an fp8 KV
# cache). Per-tensor scales: q, k and v are the quantised tensors with their per-tensor scales taken
# as 1 (as quant_gemm.sol takes w's). A static (calibrated) per-tensor scale is a constant: q's and
# k's fold into the score's scale rsqrt(D), v's into a constant factor of o; none changes the kernel.
# Meaning, in the precision policy (src/contract/canonicalize.h; `solder fuse` prints it):
#   S = q . k^T on e4m3 operands, accumulated in f32 (exact: the operands are e4m3 values);
#   the softmax in f32;
#   P = exp(S - max) rounded to e4m3 before P . V (the fp8 tolerance class: every output is 16-bit or
#   narrower and an input is fp8, so P, computed beside the e4m3 V, is rounded to e4m3, the precision
#   choice FlashAttention-3's fp8 path makes; P <= 1, so it loses e4m3's 2^-4 relative, where the
#   normalised p = e / z would fall below e4m3's range); o = (P . V) / z with z = sum exp in f32.
# The CPU executor rounds P where the GPU does; the float64 reference computes the softmax of the
# e4m3 values exactly, and outputs are checked at the fp8 tolerance (5e-2).
# Shapes: the attention suite's, 16 heads, head dim 64, batch x seq = 16k tokens (--dim D=128).
program attention_fp8
dim B = 16, H = 16, S = 1024, D = 64
small B = 1, H = 2, S = 64, D = 16
in q[B, H, S, D] : f8e4m3
in k[B, H, S, D] : f8e4m3
in v[B, H, S, D] : f8e4m3
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)
m[b, h, i] = max(j) s[b, h, i, j]
e[b, h, i, j] = exp(s[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h, j, d]
