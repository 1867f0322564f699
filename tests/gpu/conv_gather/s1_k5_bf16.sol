# s1_k5_bf16: conv_chain's shape with a 5x5 kernel, stride 1, zero padding (2, 2), bf16:
# conv1 M = 72, N = 80, K = 150; ReLU with a bias; conv2 (1x1) M = 72, N = 64, K = 80.
program conv_s1_k5_bf16
dim NB = 1, C = 6, H = 9, W = 8, O1 = 80, O2 = 64, KH = 5, KW = 5, HO = 9, WO = 8
in x[NB, C, H, W] : bf16
in w1[O1, C, KH, KW] : bf16 ~ normal(0, 0.1)
in b1[O1] : bf16 ~ normal(0, 0.5)
in w2[O2, O1] : bf16 ~ normal(0, 0.1)
y1[b, o, r : HO, q : WO] = sum(ci, u, v) select(r * 1 + u - 2 >= 0 && r * 1 + u - 2 < H && q * 1 + v - 2 >= 0 && q * 1 + v - 2 < W, x[b, ci, r * 1 + u - 2, q * 1 + v - 2], 0) * w1[o, ci, u, v]
h[b, o, r, q] : bf16 = max(y1[b, o, r, q] + b1[o], 0)
out y2[b, o2, r, q] : bf16 = sum(o) h[b, o, r, q] * w2[o2, o]
