# linear_relu_backward's g kernel alone (issue 15, thirteenth session, branch quant-lrb3; bench/NOTES.md):
# g = dy · (z > 0) as examples/linear_relu_backward.sol computes it, timed by `solder bench` beside its
# torch counterpart (bench/lrb_dw_torch_parts.py). 64 MB in and 32 MB out at nerf's sizes: floor 10.7 µs
# at 3.0 TB/s (torch.compile's where() kernel inside its backward: 29.4 µs).
program lrb_g
dim N = 65536, CO = 256
small N = 64, CO = 48
in z[N, CO] : f16
in dy[N, CO] : f16
out g[n, o] : f16 = dy[n, o] * (z[n, o] > 0)
