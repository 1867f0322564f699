# quant_gemm's GEMM alone (issue 15, sixth session): the already-quantised e4m3 activations aq, the
# e4m3 weight stored [N, K] and a per-row scale after the dot, as the two-kernel plan of quant_gemm
# runs it on the plain sm_90a skeleton. Compared in one call with torch._scaled_mm (row-wise scales)
# by bench/prologue_fast3_peers.py. Shapes: RedFuser Table 2(d) Q5; Q1 is --dim N=1536 --dim K=2560.
program fp8_rowscale_gemm
dim M = 4096, N = 7168, K = 2048
small M = 16, N = 32, K = 64
in aq[M, K] : f8e4m3
in w[N, K] : f8e4m3
in s[M] : f32 ~ uniform(0.001, 0.01)
out c[m, n] : bf16 = sum(k) aq[m, k] * w[n, k] * s[m]
