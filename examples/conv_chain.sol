# Convolution chain (FlashFuser §VI, Table V): conv1 (IC -> OC1, KS x KS, stride 1, zero padding
# of KS // 2 on each side, "same" size), ReLU, then conv2 (OC1 -> OC2, 1 x 1). NCHW layout, fp16.
# The padding is a guarded load: out-of-image taps read 0. The ReLU between the convolutions is
# the ResNet block's (FlashFuser takes its chains from ResNet; batch norm folded away).
# Default C5 (ResNet stage 1, 3x3 then 1x1): IC 64, H = W = 56, OC1 64, OC2 256, batch 1.
# C1..C4 are 1x1 then 1x1: e.g. C1 is --dim KS=1 --dim OC1=256 --dim OC2=64.
# Weights ~ normal(0, 0.05) keep fp16 values in range.
program conv_chain
dim N = 1, IC = 64, HH = 56, WW = 56, OC1 = 64, OC2 = 256, KS = 3
small N = 1, IC = 8, HH = 8, WW = 8, OC1 = 8, OC2 = 16
in x[N, IC, HH, WW] : f16
in w1[OC1, IC, KS, KS] : f16 ~ normal(0, 0.05)
in w2[OC2, OC1] : f16 ~ normal(0, 0.05)
y1[n, o, r : HH, col : WW] = sum(ci, kr, kc) select(
        r + kr - KS // 2 >= 0 && r + kr - KS // 2 < HH &&
        col + kc - KS // 2 >= 0 && col + kc - KS // 2 < WW,
        x[n, ci, r + kr - KS // 2, col + kc - KS // 2], 0) * w1[o, ci, kr, kc]
h[n, o, r, col] : f16 = max(y1[n, o, r, col], 0)
out y2[n, o2, r, col] : f16 = sum(o) h[n, o, r, col] * w2[o2, o]
