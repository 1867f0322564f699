# 2^40 elements (the most a tensor may hold): with 16 elements per block the grid would need 2^36
# blocks (the limit along x is 2^31 - 1).
program big
dim A = 1048576, B = 1048576
in x[A, B] : f32
out y[a, b] = x[a, b] * 2
