# Row softmax of a [T, N] matrix: y = exp(x - max) / sum(exp(x - max)), the three-step safe form
# a user writes. No paper shape: 4096 rows of 32768 (a 128 KiB f32 row, as long as the longest
# RedFuser variance rows), f32 in and out.
program softmax
dim T = 4096, N = 32768
small T = 8, N = 64
in x[T, N] : f32
m[t] = max(n) x[t, n]
e[t, n] = exp(x[t, n] - m[t])
z[t] = sum(n) e[t, n]
out y[t, n] : f32 = e[t, n] / z[t]
