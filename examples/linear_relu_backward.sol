# Backward pass of y = relu(x . w) (Kitsune Fig. 2(c), Fig. 8(e)): one elementwise producer,
# the ReLU derivative mask times the upstream gradient, feeding two gradient GEMMs:
#   g  = dy * (z > 0)          (z = x . w, the saved pre-activation)
#   dx = g . w^T               (input gradient, [N, CI])
#   dw = x^T . g               (weight gradient, [CI, CO]: a reduction over the N rows)
# fp16 activations and gradients; the weight gradient is f32 (mixed-precision master gradients).
# Shapes: NeRF's layer (Kitsune: hidden 256) on a batch of 65536 points.
program linear_relu_backward
dim N = 65536, CI = 256, CO = 256
small N = 64, CI = 32, CO = 48
in x[N, CI] : f16
in w[CI, CO] : f16
in z[N, CO] : f16
in dy[N, CO] : f16
g[n, o] : f16 = dy[n, o] * (z[n, o] > 0)
out dx[n, i] : f16 = sum(o) g[n, o] * w[i, o]
out dw[i, o] : f32 = sum(n) x[n, i] * g[n, o]
