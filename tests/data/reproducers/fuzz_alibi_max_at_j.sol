# Found by the mutation fuzzer (seed 2, mutant 11000: examples/alibi.sol with m[b, h, i] read as m[b, h, j]).
# Valid; `run --no-fuse` verifies it, but fusion emits a Kernel IR map that uses j out of its scope.
# Fixed: the planner no longer streams j, since the running m read at j would be a different D for every
# term (group_plan.cpp, assign_phases); `run` verifies it fused.
program alibi
dim B = 16, H = 16, S = 1024, D = 64
small B = 1, H = 2, S = 64, D = 16
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
in v[B, H, S, D] : bf16
s[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d] * rsqrt(D)
sb[b, h, i, j] = s[b, h, i, j] + pow(2, -8 * (h + 1) / H) * (j - i)
m[b, h, i] = max(j) sb[b, h, i, j]
e[b, h, i, j] = exp(sb[b, h, i, j] - m[b, h, j])
z[b, h, i] = sum(j) e[b, h, i, j]
p[b, h, i, j] = e[b, h, i, j] / z[b, h, i]
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h, j, d]
