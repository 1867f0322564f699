# linear_relu_backward's dx alone (issue 15, thirteenth session, branch quant-lrb3; bench/NOTES.md):
# dx = g · wᵀ from a stored g, at nerf's sizes M 65536, N 256, K 256, f16 -> f16 (cuBLAS inside
# torch.compile's backward: nvjet 128x256 with a 2 x 1 cluster, 23.3 µs).
program lrb_dx
dim N = 65536, CI = 256, CO = 256
small N = 64, CI = 32, CO = 48
in g[N, CO] : f16
in w[CI, CO] : f16
out dx[n, i] : f16 = sum(o) g[n, o] * w[i, o]
