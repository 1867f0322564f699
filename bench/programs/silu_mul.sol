# SiLU·up of the Llama SwiGLU MLP, as the FX translator emits it (bench/results/h100/torch_modules.md
# run 8, partition 1 of llama_mlp_rmsnorm): out = silu(g) * u over 512 tokens × 11008, bf16 in and out.
# 34 MB moved (two reads, one write): floor ≈ 11.3 µs at 3.0 TB/s. Triton (Inductor): 9.4 µs.
program silu_mul
dim T = 512, F = 11008
small T = 4, F = 64
in g[T, F] : bf16
in u[T, F] : bf16
out y[t : T, f : F] : bf16 = ((g[t, f] / (exp((-(g[t, f]))) + 1)) * u[t, f])
