# rmsnorm_gemm's row kernel alone (issue 15, seventh session; bench/NOTES.md "the row kernel in
# registers"): RMSNorm of examples/rmsnorm_gemm.sol with xn stored in bf16, as the two-kernel plan stores
# it (the type the product rounds it to). L1: 2048 × 4096 bf16 in and out, 33.6 MB moved: floor 11.2 µs
# at 3.0 TB/s. torch.compile's RMSNorm alone (bench/prologue_fast3_peers.py): 11.5 µs at L1 (sixth session).
program rmsnorm_rows
dim T = 2048, HID = 4096
small T = 16, HID = 1024
in x[T, HID] : bf16
in g[HID] : bf16 ~ normal(1, 0.1)
ms[t] = sum(c) x[t, c] * x[t, c] / HID
out xn[t, c] : bf16 = x[t, c] * rsqrt(ms[t] + 1e-5) * g[c]
