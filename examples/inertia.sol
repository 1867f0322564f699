# Moment of inertia of a point cloud about its centre of mass (RedFuser A.6, Eq. 45):
#   M = sum_l mass[l],  c = (1 / M) sum_l mass[l] * pos[l],  I = sum_l mass[l] * |pos[l] - c|^2
# (the scalar moment of Eq. 45, not the 3x3 inertia tensor). Masses are positive.
# Shapes: RedFuser Table 3(b) I8: bs 1024, n 32768, dim 3, f32.
program inertia
dim BS = 1024, N = 32768, DIM = 3
small BS = 2, N = 64
in pos[BS, N, DIM] : f32
in mass[BS, N] : f32 ~ uniform(0.1, 1)
msum[b] = sum(n) mass[b, n]
c[b, x] = sum(n) mass[b, n] * pos[b, n, x] / msum[b]
out moment[b] : f32 = sum(n, x) mass[b, n] * pow(pos[b, n, x] - c[b, x], 2)
