# s2_k3_ragged: conv_chain's shape with a 3x3 kernel, stride 2, zero padding (1, 1), f16:
# conv1 M = 220, N = 72, K = 72; ReLU with a bias; conv2 (1x1) M = 220, N = 40, K = 72.
program conv_s2_k3_ragged
dim NB = 2, C = 8, H = 19, W = 21, O1 = 72, O2 = 40, KH = 3, KW = 3, HO = 10, WO = 11
in x[NB, C, H, W] : f16
in w1[O1, C, KH, KW] : f16 ~ normal(0, 0.1)
in b1[O1] : f16 ~ normal(0, 0.5)
in w2[O2, O1] : f16 ~ normal(0, 0.1)
y1[b, o, r : HO, q : WO] = sum(ci, u, v) select(r * 2 + u - 1 >= 0 && r * 2 + u - 1 < H && q * 2 + v - 1 >= 0 && q * 2 + v - 1 < W, x[b, ci, r * 2 + u - 1, q * 2 + v - 1], 0) * w1[o, ci, u, v]
h[b, o, r, q] : f16 = max(y1[b, o, r, q] + b1[o], 0)
out y2[b, o2, r, q] : f16 = sum(o) h[b, o, r, q] * w2[o2, o]
