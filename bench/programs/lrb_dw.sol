# linear_relu_backward's dw alone (issue 15, thirteenth session, branch quant-lrb3; bench/NOTES.md):
# dw = xᵀ · g from a stored g, at nerf's sizes M 256, N 256, K 65536, f16 -> f32 (cuBLAS inside
# torch.compile's backward: nvjet 64x64 split-K 8 with a 1 x 2 cluster, 35.9 µs, + splitKreduce 1.9).
program lrb_dw
dim N = 65536, CI = 256, CO = 256
small N = 64, CI = 32, CO = 48
in x[N, CI] : f16
in g[N, CO] : f16
out dw[i, o] : f32 = sum(n) x[n, i] * g[n, o]
