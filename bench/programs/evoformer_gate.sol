# Evoformer's gate as the torch backend writes it (partition 1; bench/NOTES.md, eighth session): the
# attention's result a[S, H, R, C] times sigmoid of the gate projection g[S·R, H·C], written [S, R, H, C]
# (Inductor views it as [S·R, H·C] for linear_o): a transposing element-wise kernel.
# 50.3 MB moved: floor ≈ 16.8 µs at 3.0 TB/s. Triton (Inductor, run 9): 12.3 µs (g partly in L2).
program evoformer_gate
dim S = 128, H = 8, R = 256, C = 32, SR = 32768, HC = 256
small S = 2, H = 2, R = 8, C = 8, SR = 16, HC = 16
in a[S, H, R, C] : bf16
in g[SR, HC] : bf16
out y[s : S, r : R, h : H, c : C] : bf16 = (a[s, h, r, c] * sigmoid(g[s * R + r, h * C + c]))
