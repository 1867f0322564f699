# RMSNorm of the Llama MLP's input, as the FX translator emits it (bench/results/h100/torch_modules.md
# run 8, partition 2 of llama_mlp_rmsnorm): y = x * rsqrt(mean(x²) + 1e-6) * w over 512 tokens × 4096,
# bf16 in and out, f32 statistics. 8.4 MB moved: floor ≈ 2.8 µs at 3.0 TB/s. Triton (Inductor): 2.9 µs.
program rmsnorm
dim T = 512, H = 4096
small T = 4, H = 64
in x[T, H] : bf16
in w[H] : bf16 ~ normal(1, 0.1)
ms[t : T] : f32 = sum(c : H) (pow(x[t, c], 2)) / 4096
out y[t : T, h : H] : bf16 = ((x[t, h] * rsqrt((ms[t] + 1e-06))) * w[h])
