# MoE router (RedFuser §1, A.2.2, A.5.2): expert scores = x . Wg, softmax over the experts, then
# the top-K experts of each token: their probabilities (descending) and their indices.
# The selected probabilities are not renormalised (RedFuser's output s / t is the softmax value).
# Shapes: RedFuser Table 2(c) R7 (Qwen3-30B-A3B): 2048 tokens, hidden 2048, 128 experts, top-8.
program moe_routing
dim T = 2048, HID = 2048, E = 128, K = 8
small T = 32, HID = 64, E = 16, K = 4
in x[T, HID] : bf16
in wg[HID, E] : bf16 ~ normal(0, 0.02)
logits[t, e] = sum(c) x[t, c] * wg[c, e]
m[t] = max(e) logits[t, e]
ex[t, e] = exp(logits[t, e] - m[t])
z[t] = sum(e) ex[t, e]
probs[t, e] = ex[t, e] / z[t]
out weight[t, r] : f32, out expert[t, r] : i32 = topk(K, e) probs[t, e]
