# NeRF MLP (Mildenhall et al.), the network Kitsune runs as one spatial pipeline (Kitsune §3, §6,
# "original NeRF configuration, hidden 256"). Per sample point:
#   8 linear layers of width H with ReLU; the 63-dim positional encoding x of the position is
#   concatenated back in after the 5th layer (NeRF's skips = [4]: cat([x, h]) feeds layer 6);
#   sigma = linear(H -> 1) (raw density); feature = linear(H -> H);
#   rgb = linear(H/2 -> 3) of relu(linear(H + DIN -> H/2) of cat([feature, dir])),
# with dir the 27-dim encoding of the view direction. Outputs are the raw network outputs
# (sigmoid / ReLU of the volume renderer are not part of the MLP). fp16 inference.
# Weights ~ normal(0, 0.1), biases ~ normal(0, 0.1) keep activations O(1) through 8 layers.
# Shapes: 65536 points (1024 rays x 64 samples), IN 63 (L = 10), DIN 27 (L = 4), H 256.
program nerf_mlp
dim N = 65536, IN = 63, DIN = 27, H = 256, H2 = H // 2, RGB = 3, HX = IN + H, HV = H + DIN
small N = 64, IN = 15, DIN = 9, H = 32
in x[N, IN] : f16
in dir[N, DIN] : f16
in w0[IN, H] : f16 ~ normal(0, 0.1)
in b0[H] : f16 ~ normal(0, 0.1)
in w1[H, H] : f16 ~ normal(0, 0.1)
in b1[H] : f16 ~ normal(0, 0.1)
in w2[H, H] : f16 ~ normal(0, 0.1)
in b2[H] : f16 ~ normal(0, 0.1)
in w3[H, H] : f16 ~ normal(0, 0.1)
in b3[H] : f16 ~ normal(0, 0.1)
in w4[H, H] : f16 ~ normal(0, 0.1)
in b4[H] : f16 ~ normal(0, 0.1)
in w5[HX, H] : f16 ~ normal(0, 0.1)
in b5[H] : f16 ~ normal(0, 0.1)
in w6[H, H] : f16 ~ normal(0, 0.1)
in b6[H] : f16 ~ normal(0, 0.1)
in w7[H, H] : f16 ~ normal(0, 0.1)
in b7[H] : f16 ~ normal(0, 0.1)
in w_sigma[H] : f16 ~ normal(0, 0.1)
in b_sigma : f16 ~ normal(0, 0.1)
in w_feat[H, H] : f16 ~ normal(0, 0.1)
in b_feat[H] : f16 ~ normal(0, 0.1)
in w_view[HV, H2] : f16 ~ normal(0, 0.1)
in b_view[H2] : f16 ~ normal(0, 0.1)
in w_rgb[H2, RGB] : f16 ~ normal(0, 0.1)
in b_rgb[RGB] : f16 ~ normal(0, 0.1)
z0[n, o] = sum(i) x[n, i] * w0[i, o]
h0[n, o] : f16 = max(z0[n, o] + b0[o], 0)
z1[n, o] = sum(i) h0[n, i] * w1[i, o]
h1[n, o] : f16 = max(z1[n, o] + b1[o], 0)
z2[n, o] = sum(i) h1[n, i] * w2[i, o]
h2[n, o] : f16 = max(z2[n, o] + b2[o], 0)
z3[n, o] = sum(i) h2[n, i] * w3[i, o]
h3[n, o] : f16 = max(z3[n, o] + b3[o], 0)
z4[n, o] = sum(i) h3[n, i] * w4[i, o]
h4[n, o] : f16 = max(z4[n, o] + b4[o], 0)
# skip connection: torch.cat([x, h4], -1)
cat[n, c : HX] = select(c < IN, x[n, c], h4[n, c - IN])
z5[n, o] = sum(i) cat[n, i] * w5[i, o]
h5[n, o] : f16 = max(z5[n, o] + b5[o], 0)
z6[n, o] = sum(i) h5[n, i] * w6[i, o]
h6[n, o] : f16 = max(z6[n, o] + b6[o], 0)
z7[n, o] = sum(i) h6[n, i] * w7[i, o]
h7[n, o] : f16 = max(z7[n, o] + b7[o], 0)
zs[n] = sum(i) h7[n, i] * w_sigma[i]
out sigma[n] : f16 = zs[n] + b_sigma
zf[n, o] = sum(i) h7[n, i] * w_feat[i, o]
feat[n, o] : f16 = zf[n, o] + b_feat[o]
# torch.cat([feature, dir], -1)
catv[n, c : HV] = select(c < H, feat[n, c], dir[n, c - H])
zv[n, o] = sum(i) catv[n, i] * w_view[i, o]
hv[n, o] : f16 = max(zv[n, o] + b_view[o], 0)
zr[n, ch] = sum(i) hv[n, i] * w_rgb[i, ch]
out rgb[n, ch] : f16 = zr[n, ch] + b_rgb[ch]
