# 2^40 elements: with 16 elements per block the grid would need 2^36 blocks (the limit along x is 2^31 - 1).
program big
dim N = 1099511627776
in x[N] : f32
out y[n] = x[n] * 2
