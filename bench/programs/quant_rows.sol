# quant_gemm's row kernel alone (issue 15, seventh session; bench/NOTES.md "the row kernel in registers"):
# the per-token fp8 quantisation of examples/quant_gemm.sol (amax over K, scale = amax / 448, aq = a /
# scale rounded to e4m3), stored as the two-kernel plan stores it: scale in f32, aq in e4m3. Q5: 4096
# × 2048 bf16 in, 8.4 MB of e4m3 and 16 KB of scale out, 25.2 MB moved: floor 8.4 µs at 3.0 TB/s.
# torch.compile's quantisation alone (bench/prologue_fast3_peers.py): 21.1 µs at Q5 (sixth session).
program quant_rows
dim M = 4096, K = 2048
small M = 16, K = 1024
in a[M, K] : bf16
amax[m] = max(k) abs(a[m, k])
out scale[m] : f32 = amax[m] / 448
out aq[m, k] : f8e4m3 = a[m, k] / scale[m]
