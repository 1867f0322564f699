# Variance of each row (RedFuser A.6, Eq. 44): mean, then the mean of squared deviations.
# Shapes: RedFuser Table 3(a) V8: bs 1024, l 32768, f32. (variance_offset.sol: the same with a
# large mean offset.)
program variance
dim BS = 1024, L = 32768
small BS = 2, L = 64
in x[BS, L] : f32
mean[b] = sum(l) x[b, l] / L
out var[b] : f32 = sum(l) pow(x[b, l] - mean[b], 2) / L
