# s2_k1: conv_chain's shape with a 1x1 kernel, stride 2, zero padding (0, 0), f16:
# conv1 M = 100, N = 64, K = 16; ReLU with a bias; conv2 (1x1) M = 100, N = 90, K = 64.
program conv_s2_k1
dim NB = 1, C = 16, H = 20, W = 20, O1 = 64, O2 = 90, KH = 1, KW = 1, HO = 10, WO = 10
in x[NB, C, H, W] : f16
in w1[O1, C, KH, KW] : f16 ~ normal(0, 0.1)
in b1[O1] : f16 ~ normal(0, 0.5)
in w2[O2, O1] : f16 ~ normal(0, 0.1)
y1[b, o, r : HO, q : WO] = sum(ci, u, v) select(r * 2 + u - 0 >= 0 && r * 2 + u - 0 < H && q * 2 + v - 0 >= 0 && q * 2 + v - 0 < W, x[b, ci, r * 2 + u - 0, q * 2 + v - 0], 0) * w1[o, ci, u, v]
h[b, o, r, q] : f16 = max(y1[b, o, r, q] + b1[o], 0)
out y2[b, o2, r, q] : f16 = sum(o) h[b, o, r, q] * w2[o2, o]
