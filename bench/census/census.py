#!/usr/bin/env python3
"""The matrix-product census (issue 15): small .sol programs covering what a user of torch.matmul /
einsum writes, and where `solder emit --cuda --json` puts each of their contractions.

  census.py write DIR           write every case as DIR/NAME.sol (the committed copies: tests/census/)
  census.py check DIR           exit 1 if DIR's programs differ from the cases below (CI: scripts/test.sh)
  census.py table SOLDER OUT.md emit every case (SOLDER_CUTLASS_INCLUDE must name the CuTe headers) and
                                write the table: per contraction its skeleton, tile, T, M N K, or why not

Standard library only. Every case's default sizes have M and N of at least 64 where the product allows it
(the decode rows and N 8 are the stated exceptions); the small sizes run on the CPU executor in tests.
"""
import json
import os
import subprocess
import sys

# (name, group, what a user writes in PyTorch, program body). The body follows `program NAME`.
CASES = [
    # --- dtypes and operand layouts: torch.matmul(a, b) with a [M, K] or [K, M], b [K, N] or [N, K]
    ("mm_bf16_nn", "layout", "a @ b, a [M,K], b [K,N], bf16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("mm_bf16_nt", "layout", "x @ w.T (nn.Linear), w [N,K], bf16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("mm_bf16_tn", "layout", "a.T @ b, a [K,M], bf16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[k, m] * b[k, n]
"""),
    ("mm_bf16_tt", "layout", "a.T @ b.T, a [K,M], b [N,K], bf16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : bf16
in b[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[k, m] * b[n, k]
"""),
    ("mm_f16_nn", "layout", "a @ b, f16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : f16
in b[K, N] : f16
out c[m, n] : f16 = sum(k) a[m, k] * b[k, n]
"""),
    ("mm_f16_nt", "layout", "x @ w.T, f16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : f16
in w[N, K] : f16
out c[m, n] : f16 = sum(k) a[m, k] * w[n, k]
"""),
    ("mm_f16_tn", "layout", "a.T @ b, a [K,M], f16", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[K, M] : f16
in b[K, N] : f16
out c[m, n] : f16 = sum(k) a[k, m] * b[k, n]
"""),
    ("mm_f16_out_f32", "layout", "(a @ b).float(), f16 in, f32 out", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : f16
in b[K, N] : f16
out c[m, n] : f32 = sum(k) a[m, k] * b[k, n]
"""),
    ("mm_e4m3_nt", "layout", "torch._scaled_mm(a, w.T), e4m3, w [N,K]", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in w[N, K] : f8e4m3
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("mm_e4m3_nn", "layout", "e4m3 a @ b, b [K,N]", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in b[K, N] : f8e4m3
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("mm_e4m3_scaled", "layout", "torch._scaled_mm(a, w.T, scale_a (row), scale_b (col))", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f8e4m3
in w[N, K] : f8e4m3
in sa[M] : f32 ~ uniform(0.5, 2)
in sb[N] : f32 ~ uniform(0.5, 2)
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] * sa[m] * sb[n]
"""),
    # --- batched products
    ("bmm_bf16", "batched", "torch.bmm(a, b), a [B,M,K], b [B,K,N]", """
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, m, k] * b[i, k, n]
"""),
    ("bmm_bf16_nt", "batched", "einsum('bik,bjk->bij')", """
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, N, K] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, m, k] * b[i, n, k]
"""),
    ("bmm_bf16_tn", "batched", "einsum('bki,bkj->bij')", """
dim B = 8, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, K, M] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[i, k, m] * b[i, k, n]
"""),
    ("bmm_broadcast_weight", "batched", "x @ w, x [B,S,K], w [K,N] (3-D by 2-D)", """
dim B = 4, S = 256, N = 512, K = 512
small B = 2, S = 16, N = 32, K = 32
in x[B, S, K] : bf16
in w[K, N] : bf16
out c[i, s, n] : bf16 = sum(k) x[i, s, k] * w[k, n]
"""),
    ("bmm_broadcast_linear", "batched", "nn.Linear on [B,S,K], w [N,K]", """
dim B = 4, S = 256, N = 512, K = 512
small B = 2, S = 16, N = 32, K = 32
in x[B, S, K] : bf16
in w[N, K] : bf16
out c[i, s, n] : bf16 = sum(k) x[i, s, k] * w[n, k]
"""),
    ("bmm_broadcast_left", "batched", "a @ b, a [M,K], b [B,K,N] (2-D by 3-D)", """
dim B = 4, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[B, K, N] : bf16
out c[i, m, n] : bf16 = sum(k) a[m, k] * b[i, k, n]
"""),
    ("bmm_heads", "batched", "einsum('bhqd,bhkd->bhqk') (scores, no softmax)", """
dim B = 2, H = 8, S = 256, D = 64
small B = 1, H = 2, S = 32, D = 16
in q[B, H, S, D] : bf16
in k[B, H, S, D] : bf16
out s[b, h, i, j] : bf16 = sum(d) q[b, h, i, d] * k[b, h, j, d]
"""),
    ("bmm_gqa", "batched", "GQA scores: q [B,H,S,D], k [B,HKV,S,D], head h reads h // G", """
dim B = 2, H = 8, HKV = 2, G = H // HKV, S = 256, D = 64
small B = 1, H = 4, HKV = 2, S = 32, D = 16
in q[B, H, S, D] : bf16
in k[B, HKV, S, D] : bf16
out s[b, h, i, j] : bf16 = sum(d) q[b, h, i, d] * k[b, h // G, j, d]
"""),
    ("bmm_gqa_pv", "batched", "GQA p @ v: p [B,H,S,S], v [B,HKV,S,D]", """
dim B = 2, H = 8, HKV = 2, G = H // HKV, S = 256, D = 64
small B = 1, H = 4, HKV = 2, S = 32, D = 16
in p[B, H, S, S] : bf16
in v[B, HKV, S, D] : bf16
out o[b, h, i, d] : bf16 = sum(j) p[b, h, i, j] * v[b, h // G, j, d]
"""),
    # --- several reduced axes
    ("two_axes_mkr", "reduced axes", "einsum('mkr,krn->mn')", """
dim M = 256, N = 256, K = 32, R = 16
small M = 16, N = 32, K = 8, R = 4
in a[M, K, R] : bf16
in b[K, R, N] : bf16
out c[m, n] : bf16 = sum(k, r) a[m, k, r] * b[k, r, n]
"""),
    ("two_axes_rk", "reduced axes", "einsum('mrk,rkn->mn')", """
dim M = 256, N = 256, K = 64, R = 8
small M = 16, N = 32, K = 8, R = 4
in a[M, R, K] : bf16
in b[R, K, N] : bf16
out c[m, n] : bf16 = sum(r, k) a[m, r, k] * b[r, k, n]
"""),
    ("two_axes_batched", "reduced axes", "einsum('bmhd,bnhd->bmn') (heads summed)", """
dim B = 4, M = 256, N = 256, H = 4, D = 64
small B = 2, M = 16, N = 32, H = 2, D = 8
in a[B, M, H, D] : bf16
in b[B, N, H, D] : bf16
out c[i, m, n] : bf16 = sum(h, d) a[i, m, h, d] * b[i, n, h, d]
"""),
    # --- ragged sizes
    ("ragged_1000", "ragged", "a @ b at 1000^3", """
dim M = 1000, N = 1000, K = 1000
small M = 17, N = 33, K = 35
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("ragged_1000_nt", "ragged", "x @ w.T at 1000^3", """
dim M = 1000, N = 1000, K = 1000
small M = 17, N = 33, K = 35
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("ragged_k100", "ragged", "a @ b with K 100", """
dim M = 1024, N = 1024, K = 100
small M = 16, N = 32, K = 20
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("ragged_n8", "ragged", "a @ b with N 8", """
dim M = 1024, N = 8, K = 1024
small M = 16, N = 8, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("ragged_odd", "ragged", "a @ w.T at M 333, N 200, K 72", """
dim M = 333, N = 200, K = 72
small M = 17, N = 24, K = 24
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    # --- tiny M (decode)
    ("decode_m1", "decode", "x @ w.T with one row (decode)", """
dim M = 1, N = 4096, K = 4096
small M = 1, N = 64, K = 64
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("decode_m4", "decode", "x @ w.T with 4 rows", """
dim M = 4, N = 4096, K = 4096
small M = 4, N = 64, K = 64
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("decode_m16", "decode", "x @ w.T with 16 rows", """
dim M = 16, N = 4096, K = 4096
small M = 16, N = 64, K = 64
in a[M, K] : bf16
in w[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("decode_m16_nn", "decode", "x @ w with 16 rows, w [K,N]", """
dim M = 16, N = 4096, K = 4096
small M = 16, N = 64, K = 64
in a[M, K] : bf16
in w[K, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[k, n]
"""),
    # --- epilogues: scale, bias, activation
    ("epi_scalar_scale", "epilogue", "(a @ b) * alpha", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
in alpha : f32 ~ uniform(0.5, 2)
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n] * alpha
"""),
    ("epi_const_scale", "epilogue", "(q @ k.T) / sqrt(K)", """
dim M = 512, N = 512, K = 128
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[N, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * b[n, k] * rsqrt(K)
"""),
    ("epi_row_col_scale", "epilogue", "(a @ b) * r[:, None] * s[None, :]", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
in r[M] : f32
in s[N] : f32
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n] * r[m] * s[n]
"""),
    ("epi_bias", "epilogue", "F.linear(x, w, bias)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in bias[N] : bf16
y[m, n] = sum(k) a[m, k] * w[n, k]
out c[m, n] : bf16 = y[m, n] + bias[n]
"""),
    ("epi_bias_inline", "epilogue", "x @ w.T + bias in one expression", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in bias[N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] + bias[n]
"""),
    ("epi_bias_relu", "epilogue", "relu(F.linear(x, w, bias))", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in bias[N] : bf16
y[m, n] = sum(k) a[m, k] * w[n, k]
out c[m, n] : bf16 = max(y[m, n] + bias[n], 0)
"""),
    ("epi_gelu", "epilogue", "gelu(a @ b)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
y[m, n] = sum(k) a[m, k] * b[k, n]
out c[m, n] : bf16 = gelu(y[m, n])
"""),
    ("epi_silu_mul", "epilogue", "silu(x @ wg.T) * (x @ wu.T) (gated MLP up)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in wg[N, K] : bf16
in wu[N, K] : bf16
g[m, n] = sum(k) a[m, k] * wg[n, k]
u[m, n] = sum(k) a[m, k] * wu[n, k]
out c[m, n] : bf16 = silu(g[m, n]) * u[m, n]
"""),
    ("epi_residual", "epilogue", "x @ w.T + residual", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : bf16
in res[M, N] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k] + res[m, n]
"""),
    # --- chains
    ("chain_two", "chain", "(a @ b) @ d", """
dim M = 512, N = 512, K = 512, L = 512
small M = 16, N = 32, K = 32, L = 32
in a[M, K] : bf16
in b[K, N] : bf16
in d[N, L] : bf16
h[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
out e[m, l] : bf16 = sum(n) h[m, n] * d[n, l]
"""),
    ("chain_f32_mid", "chain", "(a @ b) @ d with the intermediate left f32", """
dim M = 512, N = 512, K = 512, L = 512
small M = 16, N = 32, K = 32, L = 32
in a[M, K] : bf16
in b[K, N] : bf16
in d[N, L] : bf16
h[m, n] = sum(k) a[m, k] * b[k, n]
out e[m, l] : bf16 = sum(n) h[m, n] * d[n, l]
"""),
    ("chain_mlp", "chain", "relu(x @ w1.T) @ w2.T", """
dim M = 512, N = 1024, K = 256, L = 256
small M = 16, N = 32, K = 32, L = 32
in a[M, K] : bf16
in w1[N, K] : bf16
in w2[L, N] : bf16
h[m, n] : bf16 = max(sum(k) a[m, k] * w1[n, k], 0)
out e[m, l] : bf16 = sum(n) h[m, n] * w2[l, n]
"""),
    # --- transposed outputs
    ("out_transposed", "transposed out", "(a @ b).T stored", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : bf16
out c[n, m] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("out_transposed_batched", "transposed out", "einsum('bmk,bkn->bnm')", """
dim B = 4, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, K, N] : bf16
out c[i, n, m] : bf16 = sum(k) a[i, m, k] * b[i, k, n]
"""),
    ("out_batch_inner", "transposed out", "einsum('bmk,bkn->mbn')", """
dim B = 4, M = 256, N = 256, K = 256
small B = 2, M = 16, N = 32, K = 32
in a[B, M, K] : bf16
in b[B, K, N] : bf16
out c[m, i, n] : bf16 = sum(k) a[i, m, k] * b[i, k, n]
"""),
    # --- mixed input dtypes
    ("mixed_bf16_f16", "mixed dtypes", "a.bf16 @ b.f16 (promoted)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in b[K, N] : f16
out c[m, n] : bf16 = sum(k) a[m, k] * b[k, n]
"""),
    ("mixed_bf16_f32w", "mixed dtypes", "x.bf16 @ w.f32 (an f32 weight)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : f32
out c[m, n] : bf16 = sum(k) a[m, k] * w[n, k]
"""),
    ("mixed_f16_e4m3w", "mixed dtypes", "x.f16 @ w.e4m3 (fp8 weight-only)", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 64
in a[M, K] : f16
in w[N, K] : f8e4m3
out c[m, n] : f16 = sum(k) a[m, k] * w[n, k]
"""),
    ("mixed_cast_bf16", "mixed dtypes", "x @ w.to(bf16), w f32 cast explicitly", """
dim M = 512, N = 512, K = 512
small M = 16, N = 32, K = 32
in a[M, K] : bf16
in w[N, K] : f32
out c[m, n] : bf16 = sum(k) a[m, k] * cast(w[n, k], bf16)
"""),
    # --- an integer index into a weight
    ("embed_matmul", "gather", "emb[tok] @ w.T (embedding then linear)", """
dim T = 512, V = 1000, C = 256, N = 512
small T = 16, V = 50, C = 32, N = 32
in tok[T] : i32 ~ randint(0, 50)
in emb[V, C] : bf16
in w[N, C] : bf16
x[t, c] = emb[tok[t], c]
out y[t, n] : bf16 = sum(c) x[t, c] * w[n, c]
"""),
    ("embed_matmul_inline", "gather", "emb[tok] @ w.T written in one statement", """
dim T = 512, V = 1000, C = 256, N = 512
small T = 16, V = 50, C = 32, N = 32
in tok[T] : i32 ~ randint(0, 50)
in emb[V, C] : bf16
in w[N, C] : bf16
out y[t, n] : bf16 = sum(c) emb[tok[t], c] * w[n, c]
"""),
    ("gather_weight_rows", "gather", "x @ w[idx].T (selected weight rows, e.g. pruned heads)", """
dim M = 512, N = 256, K = 512, V = 1024
small M = 16, N = 32, K = 32, V = 64
in a[M, K] : bf16
in idx[N] : i32 ~ randint(0, 64)
in w[V, K] : bf16
out c[m, n] : bf16 = sum(k) a[m, k] * w[idx[n], k]
"""),
]


def program_text(name, what, body):
    return f"# census: {what}\nprogram {name}\n" + body.lstrip("\n")


def write(folder):
    os.makedirs(folder, exist_ok=True)
    for name, _, what, body in CASES:
        with open(os.path.join(folder, name + ".sol"), "w") as f:
            f.write(program_text(name, what, body))


def check(folder):
    bad = []
    names = {name + ".sol" for name, *_ in CASES}
    for name, _, what, body in CASES:
        path = os.path.join(folder, name + ".sol")
        if not os.path.exists(path) or open(path).read() != program_text(name, what, body):
            bad.append(path)
    bad += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".sol") and f not in names]
    for path in bad:
        print(f"census: {path} differs from bench/census/census.py (run: census.py write {folder})")
    return 1 if bad else 0


def table(solder, out):
    import tempfile
    rows = []
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp)
        for name, group, what, _ in CASES:
            path = os.path.join(tmp, name + ".sol")
            r = subprocess.run([solder, "emit", path, "--cuda", "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                reason = (r.stderr.strip().splitlines() or ["?"])[-1]
                rows.append((group, name, what, "-", "refused", "", "", "", reason))
                counts["refused"] = counts.get("refused", 0) + 1
                continue
            doc = json.loads(r.stdout)
            for c in doc["contractions"]:
                mnk = f"{c['batch']}x{c['m']}x{c['n']}x{c['k']}" if c["batch"] > 1 else f"{c['m']}x{c['n']}x{c['k']}"
                rows.append((group, name, what, c["contraction"], c["skeleton"], c["tile"], c["type"], mnk, c["reason"]))
                counts[c["skeleton"]] = counts.get(c["skeleton"], 0) + 1
    with open(out, "w") as f:
        f.write("# The matrix-product census (issue 15)\n\n")
        f.write("Generated by `bench/census/census.py table SOLDER docs/census.md` (CuTe headers found through\n"
                "`SOLDER_CUTLASS_INCLUDE`) from the programs in `tests/census/` (written by `census.py write`), at their\n"
                "default sizes. One row per contraction: the skeleton `solder emit --cuda --json` chose, its tile, the\n"
                "MMA input type T, its extents (batch x M x N x K per block step as the kernel runs it), and the reason\n"
                "when it runs scalar. `tests/unit/backend/census_test.cpp` checks the same in CI, with the cases that\n"
                "stay off the tensor cores listed there with their reason.\n\n")
        f.write("| skeleton | contractions |\n|---|---|\n")
        for k in sorted(counts, key=lambda k: -counts[k]):
            f.write(f"| {k} | {counts[k]} |\n")
        f.write("\n| group | program | PyTorch | contraction | skeleton | tile | T | extents | why not the tensor cores |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for row in rows:
            f.write("| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |\n")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "write":
        write(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "check":
        return check(argv[1])
    if len(argv) >= 3 and argv[0] == "table":
        return table(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
