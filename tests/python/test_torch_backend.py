"""The torch.compile backend on the CPU: ATen graphs of real modules are partitioned, translated to
Solder programs, run on the CPU executor through the solder::call custom op, and compared with eager.

Needs torch (scripts/test.sh installs it from PyPI unless SOLDER_TEST_TORCH=0); without it every test
here is skipped with that reason."""
import math
import operator
import os
import re
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/test.sh installs it from PyPI unless SOLDER_TEST_TORCH=0): the torch.compile backend tests are skipped")
nn = torch.nn
F = torch.nn.functional

import solder  # noqa: E402
from solder import fx_translate, torch_backend  # noqa: E402


# ---- Modules written the way their authors write them ----------------------------------------------

class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, the manual (non-flash) path."""

    def __init__(self, n_embd=32, n_head=4, block_size=16):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class LlamaMLP(nn.Module):
    """RMSNorm then the SwiGLU MLP (Llama)."""

    def __init__(self, dim=32, hidden=64):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class SdpaAttention(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class MaskedSdpa(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class MoERouter(nn.Module):
    def __init__(self, dim=32, experts=8, k=2):
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)
        self.k = k

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)
        weights, experts = torch.topk(probs, self.k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), experts


class LayerNormStats(nn.Module):
    def __init__(self, dim=24):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x, mask):
        y = self.ln(x)
        return F.log_softmax(y.masked_fill(mask, -1e4), dim=-1), y.var(dim=-1), y.mean(dim=-1), y.amax(dim=-1)


def _cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    return {
        "nanogpt_attention": (CausalSelfAttention(), (r(2, 8, 32),)),
        "llama_mlp": (LlamaMLP(), (r(2, 5, 32),)),
        "sdpa_causal": (SdpaAttention(True), (r(1, 2, 8, 16), r(1, 2, 8, 16), r(1, 2, 8, 16))),
        "sdpa_mask": (MaskedSdpa(), (r(1, 2, 6, 8), r(1, 2, 10, 8), r(1, 2, 10, 8), torch.rand(6, 10, generator=g) > 0.3)),
        "moe_router": (MoERouter(), (r(6, 32),)),
        "layernorm_stats": (LayerNormStats(), (r(3, 24), torch.rand(3, 24, generator=g) > 0.8)),
    }


CASES = _cases()


def _aten_graph(model, inputs):
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())

    def f(p, b, *xs):
        return torch.func.functional_call(model, {**p, **b}, xs)

    with torch.no_grad():
        gm = make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="fake")(params, buffers, *inputs)
    return gm, (params, buffers) + tuple(inputs)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flat(v)]
    return [x]


def _compare(got, want, name):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5, msg=name)
        else:
            assert torch.equal(g, w), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_graph_matches_eager(name):
    model, inputs = CASES[name]
    with torch.no_grad():
        want = model(*inputs)
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    solder_parts = [p for p in explanation.partitions if not p.get("error")]
    assert solder_parts, explanation.format()
    assert any(n.target is torch.ops.solder.call.default for n in gm.graph.nodes), explanation.format()
    with torch.no_grad():
        got = gm(*args)
    _compare(got, want, name)


def test_whole_attention_is_one_solder_partition():
    model, inputs = CASES["sdpa_causal"]
    gm, _ = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    assert [p for p in explanation.partitions if not p.get("error")], explanation.format()
    calls = [n for n in gm.graph.nodes if n.target is torch.ops.solder.call.default]
    assert len(calls) == 1
    text = next(p["program"] for p in explanation.partitions if p.get("program"))
    assert "select(" in text and "-inf" in text  # the causal mask, decomposed into its math


def test_unsupported_nodes_fall_back_with_reasons():
    class Mixed(nn.Module):
        def forward(self, x):
            y = torch.cumsum(x, dim=-1)  # no translation
            return F.softmax(y * 2.0, dim=-1)

    x = torch.randn(4, 16)
    gm, args = _aten_graph(Mixed(), (x,))
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    assert any("cumsum" in why for why in explanation.fallback.values()), explanation.format()
    text = explanation.format()
    assert "left to Inductor" in text and "cumsum" in text
    with torch.no_grad():
        _compare(gm(*args), Mixed()(x), "mixed")


def test_translator_reports_why():
    g = torch.fx.Graph()
    assert "no translation" in fx_translate.supported(g.call_function(torch.ops.aten.cumsum.default, ()))
    assert fx_translate.language_has("exp")        # the probe itself works
    assert not fx_translate.language_has("nosuchfunction")


def test_fake_implementation_and_opcheck():
    model, inputs = CASES["moe_router"]
    gm, args = _aten_graph(model, inputs)
    torch_backend.partition_and_replace(gm, torch_backend.Explanation())
    call = next(n for n in gm.graph.nodes if n.target is torch.ops.solder.call.default)
    source = call.args[0]
    assert source.startswith("# solder::call outputs ") and "program fx_partition_" in source
    real_inputs = [torch.randn(n.meta["val"].shape) if n.meta["val"].dtype.is_floating_point else n.meta["val"] for n in call.args[1]]
    torch.library.opcheck(torch.ops.solder.call.default, (source, real_inputs),
                          test_utils=("test_schema", "test_faketensor"))


def test_backend_is_registered():
    import torch._dynamo

    assert "solder" in torch._dynamo.list_backends(exclude_tags=())


def _no_compile_caches():
    import contextlib

    import torch._functorch.config
    import torch._inductor.config

    stack = contextlib.ExitStack()
    stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
    stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
    return stack


@pytest.mark.skipif(os.environ.get("SOLDER_TEST_INDUCTOR", "1") == "0", reason="SOLDER_TEST_INDUCTOR=0")
def test_torch_compile_backend_end_to_end():
    # The whole path: Dynamo, AOTAutograd, the partitioner, Inductor for the rest (C++ on the CPU).
    model, inputs = CASES["llama_mlp"]
    torch._dynamo.reset()
    with torch.no_grad(), _no_compile_caches():
        want = model(*inputs)
        got = torch.compile(model, backend="solder")(*inputs)
    _compare(got, want, "llama_mlp compiled")
    explanations = torch_backend._last_explanations
    assert explanations and any(not p.get("error") for p in explanations[-1].partitions)


@pytest.mark.skipif(os.environ.get("SOLDER_TEST_INDUCTOR", "1") == "0", reason="SOLDER_TEST_INDUCTOR=0")
def test_training_graph_backward_on_inductor():
    model = LlamaMLP()
    x = torch.randn(2, 3, 32, requires_grad=True)
    torch._dynamo.reset()
    torch_backend._backward_warned = False
    with warnings.catch_warnings(record=True) as caught, _no_compile_caches():
        warnings.simplefilter("always")
        y = torch.compile(model, backend="solder")(x)
        y.sum().backward()
    assert any("backward runs on Inductor" in str(w.message) for w in caught)
    x2 = x.detach().clone().requires_grad_(True)
    model(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-5)


def test_explain_prints_partitions(capsys):
    model, inputs = CASES["moe_router"]
    found = solder.explain(model, *inputs)
    out = capsys.readouterr().out
    assert found and "partition" in out and "program fx_partition_" in out


def test_linear_layers_go_to_inductor_unless_asked():
    model, inputs = CASES["nanogpt_attention"]
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    assert any("linear layer" in why for why in explanation.fallback.values()), explanation.format()
    program = next(p["program"] for p in explanation.partitions if p.get("program"))
    # bmm's B·H batch is defined over b and h: no // or % of a merged index inside the attention (the
    # output's relayout back to [B·T, C] has them), and positional index names
    body = program.split("out y0")[0]
    assert "// " not in body and "max(r0" in body, program
    c = explanation.coverage()
    assert 0 < c["flops"] < c["total_flops"]
    with torch.no_grad():
        _compare(gm(*args), model(*inputs), "nanogpt, linear on Inductor")
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation, linear="solder")
    assert not any("linear layer" in why for why in explanation.fallback.values()), explanation.format()
    c = explanation.coverage()
    assert c["flops"] == c["total_flops"]
    with torch.no_grad():
        _compare(gm(*args), model(*inputs), "nanogpt, linear on Solder")


def test_bool_constants_are_conditions():
    class Masks(nn.Module):
        def forward(self, x):
            keep = torch.logical_and(x > 0, torch.ones_like(x, dtype=torch.bool))
            return torch.where(keep.any(dim=-1, keepdim=True), x * 2.0, x - 1.0), keep.float().sum(dim=-1)

    x = torch.randn(4, 8)
    gm, args = _aten_graph(Masks(), (x,))
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    assert [p for p in explanation.partitions if not p.get("error")], explanation.format()
    with torch.no_grad():
        _compare(gm(*args), Masks()(x), "masks")


def test_attention_on_computed_operands_is_its_own_partition():
    class Rotated(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(torch.cos(q) * q, k * 2.0, v, is_causal=True)

    inputs = tuple(torch.randn(1, 2, 8, 16) for _ in range(3))
    gm, args = _aten_graph(Rotated(), inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    programs = [p["program"] for p in explanation.partitions if p.get("program")]
    assert len(programs) == 2, explanation.format()
    # the operands are written by the first program; the attention's score contraction reads inputs
    assert "cos(" in programs[0] and "cos(" not in programs[1] and "max(r0" in programs[1], programs
    with torch.no_grad():
        _compare(gm(*args), Rotated()(*inputs), "rotated attention")


def test_linear_size_gemms_read_stored_operands():
    # With the linear layers on Solder, a GEMM of a linear layer's size reads stored matrices (what the
    # GEMM skeleton's TMA loads take): the RMSNorm is stored once for gate and up, SiLU·up once for down,
    # and the [1, T, C] input is declared [T, C] (dims of size 1 left out; the call passes a view).
    model = LlamaMLP(dim=256, hidden=320)
    x = torch.randn(1, 64, 256)
    gm, args = _aten_graph(model, (x,))
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation, linear="solder")
    program = next(p["program"] for p in explanation.partitions if p.get("program"))
    inputs = [l for l in program.splitlines() if l.startswith("in ")]
    assert "[D0_64, D1_256] : f32" in "".join(inputs) and not any("_1]" in l or "_1," in l for l in inputs), program
    products = [l for l in program.splitlines() if "= sum(r0" in l and "* x" in l and "pow" not in l]
    assert len(products) == 3, program
    for line in products:  # t[i0, r0] * x[i1, r0]: a stored operand times a weight, nothing computed
        rhs = line.split("= sum(r0", 1)[1].split(")", 1)[1].strip()
        assert rhs.count("[") == 2 and "(" not in rhs, line
    assert program.count("rsqrt(") == 1, program  # the RMSNorm is stored once, read by gate and up
    with torch.no_grad():
        _compare(gm(*args), model(x), "llama mlp, linear on Solder")
    # Below the size (K < 256) the operands stay computed inside the product, as before.
    assert not fx_translate.whole_gemm_candidate(64, 320, 32)


def test_gated_policy_gives_solder_the_gated_pair_only():
    # solder.linear="gated": SwiGLU's gate and up projections (one activation, their results multiplied
    # after SiLU) go to Solder with the RMSNorm and the gating, as stored-operand products (one dual-B
    # launch on the GPU); the down projection stays on Inductor with its reason.
    model = LlamaMLP(dim=256, hidden=320)
    x = torch.randn(1, 64, 256)
    gm, args = _aten_graph(model, (x,))
    assert {n.name for n in torch_backend.gated_pairs(gm.graph)} == {"mm", "mm_1"}, gm.graph
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation, linear="gated")
    programs = [p["program"] for p in explanation.partitions if p.get("program") and not p.get("error")]
    gated = next(p for p in programs if "exp(" in p)
    products = [l for l in gated.splitlines() if "= sum(r0" in l and "pow" not in l]
    assert len(products) == 2 and "rsqrt(" in gated and "out y0" in gated, gated
    assert "not one of a gated pair" in explanation.fallback.get("mm_2", ""), explanation.format()
    with torch.no_grad():
        _compare(gm(*args), model(x), "llama mlp, gated pair on Solder")
    # no gated pair: an MLP with one hidden product keeps every linear layer on Inductor
    plain = nn.Sequential(nn.Linear(256, 320), nn.GELU(), nn.Linear(320, 256))
    gm2, _ = _aten_graph(plain, (x,))
    assert not torch_backend.gated_pairs(gm2.graph)
    with pytest.raises(solder.SolderError):
        torch_backend._linear_policy("gate")


# ---- Attention written with bmm and a buffer mask (nanoGPT): the forms Solder's attention paths take ----

def _compiled_programs(model, inputs):
    """torch.compile(model, backend="solder") on the CPU: (its outputs, the programs of its partitions,
    the explanations)."""
    torch._dynamo.reset()
    start = len(torch_backend._last_explanations)
    with torch.no_grad(), _no_compile_caches():
        compiled = torch.compile(model, backend="solder")
        got = compiled(*inputs)
    found = torch_backend._last_explanations[start:]
    programs = [p["program"] for e in found for p in e.partitions if p.get("program") and not p.get("error")]
    return compiled, got, programs, found


@pytest.mark.skipif(os.environ.get("SOLDER_TEST_INDUCTOR", "1") == "0", reason="SOLDER_TEST_INDUCTOR=0")
def test_tril_buffer_mask_is_an_index_mask_guarded_on_the_buffer():
    # nanoGPT: masked_fill(self.bias[:, :, :T, :T] == 0, -inf) with a tril(ones) buffer. The buffer's
    # values are read at compile time: the mask is `select(j <= i, S, -inf)` (the causal form), the scale
    # is inside the score sum, q, k, v are read as [B, H, T, D] inputs and the attention's result is the
    # output itself. The call is guarded on the buffer: changed in place, the fallback program (the
    # buffer read as a tensor) runs, and the result follows the new buffer as eager's does.
    torch.manual_seed(0)
    model = CausalSelfAttention(n_embd=32, n_head=4, block_size=16).eval()
    x = torch.randn(2, 12, 32)  # T 12 < block 16: the buffer is sliced
    compiled, got, programs, found = _compiled_programs(model, (x,))
    with torch.no_grad():
        _compare(got, model(x), "nanoGPT attention")
    attention = next(p for p in programs if "max(r0" in p)
    assert "select((r0 <= i2), t1[i0, i1, i2, r0], (-inf))" in attention, attention
    assert "* 0.35355339059327373" in attention.split("\n")[[k for k, l in enumerate(attention.split("\n")) if l.startswith("t1[")][0]], attention
    inputs = [l for l in attention.splitlines() if l.startswith("in ")]
    assert len(inputs) == 3 and all(l.endswith("[D0_2, D1_4, D2_12, D3_8] : f32") for l in inputs), attention
    assert re.search(r"^out y0\[.*\] : f32 = sum\(r0", attention, re.M), attention  # the result itself
    assert any(p.get("guards") and "tril" in p["guards"][0] for e in found for p in e.partitions), \
        "\n".join(e.format() for e in found)
    assert "guarded on the values of" in "\n".join(e.format() for e in found)
    with torch.no_grad():
        model.bias[..., 3, 0] = 0  # no longer tril: the guard fails, the fallback reads the buffer
        _compare(compiled(x), model(x), "nanoGPT attention, buffer changed in place")
        model.bias.copy_(torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))  # tril again: the guarded program
        _compare(compiled(x), model(x), "nanoGPT attention, buffer restored")


@pytest.mark.skipif(os.environ.get("SOLDER_TEST_INDUCTOR", "1") == "0", reason="SOLDER_TEST_INDUCTOR=0")
def test_a_buffer_that_is_not_tril_is_read_as_a_tensor():
    torch.manual_seed(0)
    model = CausalSelfAttention(n_embd=32, n_head=4, block_size=16).eval()
    with torch.no_grad():
        model.bias.copy_(torch.triu(torch.ones(16, 16)).view(1, 1, 16, 16))  # anti-causal
    x = torch.randn(2, 12, 32)
    _, got, programs, found = _compiled_programs(model, (x,))
    with torch.no_grad():
        _compare(got, model(x), "triu buffer")
    attention = next(p for p in programs if "max(r0" in p)
    assert "<= i2" not in attention and len([l for l in attention.splitlines() if l.startswith("in ")]) == 4, attention
    assert not any(p.get("guards") for e in found for p in e.partitions)


def test_tril_constant_and_mask_forms():
    assert fx_translate.tril_constant(torch.tril(torch.ones(1, 1, 5, 5)))
    assert fx_translate.tril_constant(torch.tril(torch.ones(4, 6, dtype=torch.bfloat16)))
    assert not fx_translate.tril_constant(torch.triu(torch.ones(5, 5)))
    assert not fx_translate.tril_constant(torch.ones(5))
    t = torch.tril(torch.ones(5, 5))
    t[4, 0] = 2
    assert not fx_translate.tril_constant(t)
    # select(C, -inf, x) is written select(not C, x, -inf) when C is one comparison; never otherwise
    assert fx_translate._select("(r0 > i2)", "(-inf)", "s") == "select((r0 <= i2), s, (-inf))"
    assert fx_translate._select("((a > b) && (c < d))", "(-inf)", "s") == "select(((a > b) && (c < d)), (-inf), s)"
    assert fx_translate._select("(x0[i0] > 0)", "(-inf)", "s") == "select((x0[i0] <= 0), s, (-inf))"
    assert fx_translate._select("(a) + (b > c)", "(-inf)", "s") == "select((a) + (b > c), (-inf), s)"
    assert fx_translate._select("(r0 > i2)", "0", "s") == "select((r0 > i2), 0, s)"
    assert fx_translate._negated("(select((a > b), 1, 0) == 0)") is None


def test_batched_product_relayouts_go_to_inductor():
    # The ATen graph of nanoGPT's attention: q, k, v are slices of one projection; the partition reads
    # each at its [B, H, T, D] view and writes the result [B, H, T, D]; the views around stay Inductor's.
    model = CausalSelfAttention(n_embd=32, n_head=4, block_size=16).eval()
    x = torch.randn(2, 16, 32)
    gm, args = _aten_graph(model, (x,))
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    program = next(p["program"] for p in explanation.partitions if p.get("program") and "max(r0" in p["program"])
    inputs = [l for l in program.splitlines() if l.startswith("in ")]
    assert sum(l.endswith("[D0_2, D1_4, D2_16, D3_8] : f32") for l in inputs) == 3, program
    assert "//" not in program and "%" not in program, program
    assert "relayout view" in explanation.fallback.get("split", ""), explanation.format()
    with torch.no_grad():
        _compare(gm(*args), model(x), "nanoGPT attention, traced")


class DiffAttention(nn.Module):
    """Differential attention (Flashlight Listing 4): two softmaxes, one product with v."""

    def forward(self, q1, k1, q2, k2, v):
        s = 1.0 / math.sqrt(q1.size(-1))
        a1 = F.softmax(q1 @ k1.transpose(-2, -1) * s, dim=-1)
        a2 = F.softmax(q2 @ k2.transpose(-2, -1) * s, dim=-1)
        return (a1 - 0.8 * a2) @ v


def test_differential_attention_is_two_attentions_and_a_combine():
    # (a1 - λ·a2) @ v becomes a1 @ v - λ·(a2 @ v): each attention its own program (scores, row max and
    # sum, the product with v: the online-softmax form, no size-1 dims in the row states), then the
    # element-wise combine. The same value; compared with eager.
    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 3, 24, 8) for _ in range(5))
    gm, args = _aten_graph(DiffAttention(), inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    programs = [p["program"] for p in explanation.partitions if p.get("program") and not p.get("error")]
    attentions = [p for p in programs if "max(r0" in p]
    assert len(attentions) == 2, explanation.format()
    for p in attentions:
        assert "D3_1" not in p and "_1 =" not in p.split("\n")[1], p  # no dim of size 1 declared
        assert p.count("max(r0") == 1 and re.search(r"^out y0\[.*\] : f32 = sum\(r0", p, re.M), p
        assert "* 0.35355339059327373" in p, p  # the scale inside the score sum
    with torch.no_grad():
        _compare(gm(*args), DiffAttention()(*inputs), "differential attention")


@pytest.mark.skipif(os.environ.get("SOLDER_TEST_INDUCTOR", "1") == "0", reason="SOLDER_TEST_INDUCTOR=0")
def test_differential_attention_compiled_matches_eager():
    torch.manual_seed(1)
    inputs = tuple(torch.randn(1, 2, 20, 8) for _ in range(5))
    _, got, programs, _ = _compiled_programs(DiffAttention(), inputs)
    with torch.no_grad():
        _compare(got, DiffAttention()(*inputs), "differential attention, torch.compile")
    assert len([p for p in programs if "max(r0" in p]) == 2, programs


def test_a_difference_of_graph_inputs_is_not_distributed():
    # bmm(x - y, w) with x, y inputs of the graph stays one product (nothing is computed on chip).
    class M(nn.Module):
        def forward(self, x, y, w):
            return torch.softmax((x - y) @ w, dim=-1)

    inputs = (torch.randn(2, 4, 6), torch.randn(2, 4, 6), torch.randn(2, 6, 5))
    gm, args = _aten_graph(M(), inputs)
    torch_backend._distribute_products(gm)
    assert sum(n.target is torch.ops.aten.bmm.default for n in gm.graph.nodes) == 1
    diff, _ = _aten_graph(DiffAttention(), tuple(torch.randn(1, 2, 6, 4) for _ in range(5)))
    torch_backend._distribute_products(diff)  # two score products, two products with v
    assert sum(n.target is torch.ops.aten.bmm.default for n in diff.graph.nodes) == 4
    torch_backend.partition_and_replace(gm, torch_backend.Explanation())
    with torch.no_grad():
        _compare(gm(*args), M()(*inputs), "difference of inputs")


def test_evoformer_row_attention_reads_stored_q_k_v_and_bias():
    # OpenFold's MSA row attention: q / sqrt(c) before its product, the pair bias z a permuted view of
    # a projection, an output gate. The scale moves onto the product (inside the score sum), q, k, v and
    # z are read whole ([S, H, R, C] and [H, R, R]), and the gate is a partition of its own after the
    # attention, whose result is its program's output.
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import torch_modules

    model, inputs = torch_modules.make("evoformer_row_attention", device="cpu", dtype=torch.float32, small=True)
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    programs = [p["program"] for p in explanation.partitions if p.get("program") and not p.get("error")]
    attention = next(p for p in programs if "max(r0" in p)
    inputs_decl = sorted(l.split("[", 1)[1] for l in attention.splitlines() if l.startswith("in "))
    assert inputs_decl == sorted(["D0_4, D0_4, D1_16, D2_8] : f32"] * 3 + ["D0_4, D1_16, D1_16] : f32"]), attention
    assert "//" not in attention and "%" not in attention and "sigmoid" not in attention, attention
    assert "* 0.35355339059327373" in attention and re.search(r"^out y0\[.*= sum\(r0", attention, re.M), attention
    assert any("sigmoid" in p for p in programs if p is not attention), programs
    with torch.no_grad():
        _compare(gm(*args), model(*inputs), "evoformer row attention")


class InductorSoftmaxForm(nn.Module):
    """Attention as Inductor's joint-graph pass writes softmax(s * c) on the GPU: exp((s * 1 - max) * c)."""

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * 1.0
        e = torch.exp((s - s.amax(dim=-1, keepdim=True)) * 0.125)
        return (e / e.sum(dim=-1, keepdim=True)) @ v


def test_softmax_scale_after_the_max_is_put_back_into_the_scores():
    # (s - max(s)) * c → s·c - max(s·c): the scale folds into the score sum and the row max reads the
    # score itself, the online-softmax form of the attention paths (diff attention on the H100, run 6).
    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 3, 24, 8) for _ in range(3))
    gm, args = _aten_graph(InductorSoftmaxForm(), inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    program = next(p["program"] for p in explanation.partitions if p.get("program") and "max(r0" in p["program"])
    assert "x1[i0, i1, r0] * x0[i0, i2, r0] * 0.125" in program or "x0[i0, i1, r0] * x1[i0, i2, r0] * 0.125" in program, program
    assert re.search(r"max\(r0 : \w+\) t1\[i0, i1, r0\]$", program, re.M), program
    with torch.no_grad():
        _compare(gm(*args), InductorSoftmaxForm()(*inputs), "Inductor's softmax form")


def test_gqa_expansion_stays_with_the_attention():
    # Llama: k and v repeat_interleave'd from the KV heads to the query heads. The RoPE partition writes
    # the rotated k at its KV heads and v relayouted to [Hkv, T, D], with the rotated q, as one stacked
    # output (one kernel: v, q, k along the head dim, T·D flattened), and the attention reads k and v as
    # k[h // G] (GQA), its result the program's output.
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import torch_modules

    model, inputs = torch_modules.make("llama_attention_rope_gqa", device="cpu", dtype=torch.float32, small=True)
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    programs = [p["program"] for p in explanation.partitions if p.get("program") and not p.get("error")]
    attention = next(p for p in programs if "max(r0" in p)
    decl = [l for l in attention.splitlines() if l.startswith("in ")]
    assert sorted(l.split("[", 1)[1] for l in decl) == sorted(["D0_2, D1_16, D1_16] : f32"] * 2 + ["D2_4, D1_16, D1_16] : f32"]), attention
    assert attention.count("(i0) // 2") == 2 and re.search(r"^out y0\[.*= sum\(r0", attention, re.M), attention
    rope = next(p for p in programs if "max(r0" not in p)
    # cos and sin of position · frequency are [T, D] tables that Inductor writes once (table_nodes); the
    # RoPE program reads them ([16, 16] inputs) rather than recomputing them for every head
    assert not any("cos(" in p or "sin(" in p for p in programs), programs
    assert "table" in explanation.fallback.get("cos", "") and "table" in explanation.fallback.get("iota", ""), explanation.format()
    assert sum(l.startswith("in ") and "[D0_16, D0_16] : f32" in l for l in rope.splitlines()) == 2, rope
    outs = [l for l in rope.splitlines() if l.startswith("out ")]
    assert len(outs) == 1 and re.match(r"out y0\[i0 : D\d_8, i1 : D\d_256\] : f32 = select\(i0 < 2, x2\[", outs[0]), rope
    assert "select(i0 < 6, " in outs[0] and "(i0 - 6)" in outs[0], rope  # v heads 0..1, q 2..5, k 6..7
    part = next(p for p in explanation.partitions if p.get("program") == rope)
    assert len(part["stacked"]) == 3 and any(x.endswith("[:, 0:2, :, :]") for x in part["stacked"]), part
    slices = [n for n in gm.graph.nodes if n.target is torch.ops.aten.slice.Tensor and n.args[0].target is operator.getitem]
    assert sorted((n.args[1], n.args[2], n.args[3]) for n in slices) == [(1, 0, 2), (1, 2, 6), (1, 6, 8)], gm.graph
    with torch.no_grad():
        _compare(gm(*args), model(*inputs), "llama attention, GQA")


def test_small_sin_cos_read_broadcast_are_tables_for_inductor():
    # cos of a small value read broadcast by a 16× larger product is a table: it and what computes it stay
    # with Inductor (written once), the product reads it; cos of a value of the product's own size is not.
    class Table(nn.Module):
        def forward(self, a, y):
            return (y * torch.cos(a * 0.5) + 1) * 2

    class Plain(nn.Module):
        def forward(self, a, y):
            return (y * torch.cos(y * 0.5) + 1) * 2

    a, y = torch.randn(4, 8), torch.randn(16, 4, 8)
    for model, table in ((Table(), True), (Plain(), False)):
        gm, args = _aten_graph(model, (a, y))
        assert bool(torch_backend.table_nodes(gm.graph)) == table
        explanation = torch_backend.Explanation()
        torch_backend.partition_and_replace(gm, explanation)
        programs = [p["program"] for p in explanation.partitions if p.get("program")]
        assert programs and any("cos(" in p for p in programs) != table, explanation.format()
        if table:
            assert "table" in explanation.fallback["cos"] and "table" in explanation.fallback["mul"], explanation.format()
        with torch.no_grad():
            _compare(gm(*args), model(a, y), "table" if table else "plain")


def test_stacked_outputs_of_an_elementwise_partition():
    # Two element-wise results of the same shape but one dim (and dtype) are one stacked output, each a
    # slice of it; results that differ in two dims, or in dtype, stay separate outputs.
    class Two(nn.Module):
        def forward(self, a, b):
            return torch.sin(a) * 2 + 1, (b * b) - 3  # [2, 3, 5, 4] and [2, 7, 5, 4]

    class Apart(nn.Module):
        def forward(self, a, b):
            return torch.sin(a) * 2 + 1, (b * b).transpose(1, 2) - 3  # [2, 3, 5, 4] and [2, 5, 7, 4]

    a, b = torch.randn(2, 3, 5, 4), torch.randn(2, 5, 7, 4).transpose(1, 2)
    for model, stacked in ((Two(), True), (Apart(), False)):
        gm, args = _aten_graph(model, (a, b))
        explanation = torch_backend.Explanation()
        torch_backend.partition_and_replace(gm, explanation)
        part = next(p for p in explanation.partitions if p.get("program"))
        outs = [l for l in part["program"].splitlines() if l.startswith("out ")]
        assert (len(outs) == 1) == stacked and bool(part.get("stacked")) == stacked, part
        if stacked:
            # [2, 3 + 7, 5·4]: stacked along dim 1, the dims after it flattened
            assert outs[0].startswith("out y0[i0 : D0_2, i1 : D5_10, i2 : D6_20] : f32 = select(i1 < 3, "), outs
        with torch.no_grad():
            _compare(gm(*args), model(a, b), "stacked" if stacked else "apart")


def test_evoformer_layer_norms_and_gate_write_their_own_shapes():
    # The two LayerNorms are separate partitions that write [.., rows, C] (their reshape to [rows, C]
    # for the linear layers is Inductor's, free): each fuses statistics and normalisation into one
    # kernel; the gate writes [S, R, H, C] without the merged dims' // and %; q, k, v (non-contiguous
    # relayout views of the projections) reach solder::call through explicit contiguous clones in the
    # graph, which Inductor copies, rather than solder::call's own .contiguous().
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import torch_modules

    model, inputs = torch_modules.make("evoformer_row_attention", device="cpu", dtype=torch.float32, small=True)
    gm, args = _aten_graph(model, inputs)
    explanation = torch_backend.Explanation()
    torch_backend.partition_and_replace(gm, explanation)
    programs = [p["program"] for p in explanation.partitions if p.get("program") and not p.get("error")]
    norms = [p for p in programs if "rsqrt" in p]
    assert len(norms) == 2, explanation.format()
    for p in norms:
        outs = [l for l in p.splitlines() if l.startswith("out ")]
        assert len(outs) == 1 and outs[0].count(":") == 4 and "//" not in p, p  # [a, b, c], no merged dims
        assert solder.compile(p, device="cpu").kernel_count == 1, p
    gate = next(p for p in programs if "sigmoid" in p)
    assert "%" not in gate.split("out ", 1)[1].split("=", 1)[0], gate
    assert any("a reshape of the partition's result" in why for why in explanation.fallback.values()), explanation.format()
    calls = [n for n in gm.graph.nodes if n.target is torch.ops.solder.call.default]
    clones = [a for c in calls for a in c.args[1] if a.target is torch.ops.aten.clone.default
              and a.kwargs.get("memory_format") is torch.contiguous_format]
    assert len(clones) >= 3, gm.graph  # q, k, v (and the permuted pair bias)
    with torch.no_grad():
        _compare(gm(*args), model(*inputs), "evoformer row attention")


def test_independent_parts_split_only_with_reductions():
    # Two unrelated row reductions become two partitions; two unrelated element-wise maps stay one.
    class TwoNorms(nn.Module):
        def forward(self, a, b):
            return F.layer_norm(a, (8,)) * 2, torch.softmax(b, dim=-1) + 1

    class TwoMaps(nn.Module):
        def forward(self, a, b):
            return torch.sigmoid(a) * 3, torch.tanh(b) - 1

    for model, parts in ((TwoNorms(), 2), (TwoMaps(), 1)):
        inputs = (torch.randn(4, 6, 8), torch.randn(5, 7))
        gm, args = _aten_graph(model, inputs)
        explanation = torch_backend.Explanation()
        torch_backend.partition_and_replace(gm, explanation)
        ok = [p for p in explanation.partitions if not p.get("error")]
        assert len(ok) == parts, explanation.format()
        with torch.no_grad():
            _compare(gm(*args), model(*inputs), type(model).__name__)
