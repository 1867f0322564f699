# One nerf_mlp hidden layer alone (issue 15, seventh session, branch gemm-epilogue): 65536 points, width
# 256, f16, bias then ReLU after the dot, stored row-major: the skeleton's short-K product (K 256: four
# K tiles per 128 x 256 output tile) whose epilogue decides its time. Floor 22.4 us (32 MB in, 32 MB out).
program f16_bias_relu_layer
dim N = 65536, H = 256
small N = 64, H = 32
in h[N, H] : f16
in w[H, H] : f16 ~ normal(0, 0.1)
in b[H] : f16 ~ normal(0, 0.1)
out y[n, o] : f16 = max(sum(i) h[n, i] * w[i, o] + b[o], 0)
