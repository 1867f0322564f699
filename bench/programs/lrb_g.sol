# linear_relu_backward's g kernel alone (issue 15, thirteenth session, branch quant-lrb3; bench/NOTES.md):
# g = dy · (z > 0) as examples/linear_relu_backward.sol computes it, timed by `solder bench` beside its
# torch counterpart (bench/lrb_dw_torch_parts.py). z and dy in (67 MB), g out (34 MB) at nerf's sizes: floor
# 33.6 µs at 3.0 TB/s if g reaches HBM (torch.compile's where() inside its backward: 29.4 µs, g partly in L2).
program lrb_g
dim N = 65536, CO = 256
small N = 64, CO = 48
in z[N, CO] : f16
in dy[N, CO] : f16
out g[n, o] : f16 = dy[n, o] * (z[n, o] > 0)
