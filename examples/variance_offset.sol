# variance.sol with inputs far from zero: x ~ normal(1000, 1). The power-sum shortcut
# (E[x^2] - E[x]^2) cancels catastrophically in f32 here; a fused form must re-centre
# (fusion-notes §3). Expected result: about 1 per row.
# Shapes: RedFuser Table 3(a) V8: bs 1024, l 32768, f32.
program variance_offset
dim BS = 1024, L = 32768
small BS = 2, L = 64
in x[BS, L] : f32 ~ normal(1000, 1)
mean[b] = sum(l) x[b, l] / L
out var[b] : f32 = sum(l) pow(x[b, l] - mean[b], 2) / L
