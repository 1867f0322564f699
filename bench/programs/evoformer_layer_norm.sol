# Evoformer's first LayerNorm as the torch backend writes it (bench/torch_modules.py
# evoformer_row_attention, partition 2; bench/NOTES.md, eighth session): the statistics and the
# normalisation of [S, R, C] rows in one kernel, the result in its own shape (Inductor views it as
# [S·R, C] for the linear layers). The second LayerNorm: --dim S=256 --dim C=128.
# 33.5 MB moved: floor ≈ 11.2 µs at 3.0 TB/s. Triton (Inductor, run 9): 13.7–15.5 µs.
program evoformer_layer_norm
dim S = 128, R = 256, C = 256
small S = 2, R = 8, C = 64
in x[S, R, C] : bf16
in w[C] : bf16
in b[C] : bf16
mu[s : S, r : R] : f32 = sum(c : C) (x[s, r, c]) / C
var[s : S, r : R] : f32 = sum(c : C) (x[s, r, c] - mu[s, r]) * (x[s, r, c] - mu[s, r])
out y[s : S, r : R, c : C] : bf16 = ((((x[s, r, c] - mu[s, r]) * rsqrt(((var[s, r]) / C + 1e-05))) * w[c]) + b[c])
