# Found by the random-valid-program fuzzer (ProgramRandom, seed 36), minimized.
#   solder run fused_bf16_accumulator.sol --backend cpu --seed 36            MISMATCH (error 1.2e-2 > 1e-2)
#   solder run fused_bf16_accumulator.sol --backend cpu --seed 36 --no-fuse  verified
# Cause (fusion lowering, not the executor): the fused kernel keeps the running sum in the target's
# dtype, `register t0_tile[1] : bf16`, so every stream step rounds the partial sum to bf16; the
# reference and the unfused lowering round once, when t0 is written. With cancellation (a mean of
# uniform(-1, 1) values) the repeated rounding exceeds the bf16 tolerance. See design.md, "inner K
# loops accumulate into the member's 16-bit dtype".
# Fixed (a5de6d5): a looped narrow sum or product accumulates in an f32 tile and is rounded once
# after its loops (lower_fused_members.cpp, compute_member). Regression test: FuzzFindings.FusedBf16Accumulator.
program fused_bf16_accumulator
dim N = 64
in a0[N] : f32 ~ uniform(-1, 1)
out t0[] : bf16 = sum(n : N) a0[n] / N
