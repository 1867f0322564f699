# Tanh soft-capped attention: scores become CAP * tanh(s / CAP) before the softmax.
# CAP = 20 is FlexAttention's soft-capping example (Flashlight §4 cites FlexAttention for Softcap);
# Gemma-2 uses 50 for attention logits: run with --dim CAP=50. The small set uses CAP = 2 so that
# tanh is far from linear on N(0,1) scores and the tests exercise the nonlinearity.
# Shapes: Flashlight §4 MHA (16 heads, head dim 64, seq 1024 x batch 16 = 16k tokens).
program softcap
dim B = 16, H = 16, S = 1024, D = 64, CAP = 20
small B = 1, H = 2, S = 64, D = 16, CAP = 2
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
in v[B, H, S, D] : bf16
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)
sc[b, h, i, j] = CAP * tanh(s[b, h, i, j] / CAP)
m[b, h, i] = max(j) sc[b, h, i, j]
e[b, h, i, j] = exp(sc[b, h, i, j] - m[b, h, i])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h, j, d]
