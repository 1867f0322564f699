# Reduction over the batch dim (Kitsune Fig. 2(b)): the bias gradient of a linear layer,
# db[c] = sum_n dy[n, c], the column sums of a tall [N, C] gradient. Few outputs, a long
# reduction: parallelism must come from splitting N (split partials, then a final reduce).
# fp16 gradient in, f32 sum out. Shapes: NeRF's width (Kitsune: hidden 256) over 65536 points.
program batch_reduction
dim N = 65536, C = 256
small N = 256, C = 16
in dy[N, C] : f16
out db[c] : f32 = sum(n) dy[n, c]
