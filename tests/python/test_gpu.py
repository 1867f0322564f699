"""solder.Kernel on the GPU with torch tensors (tests/gpu/torch.sh runs these on an H100; skipped, with the
reason, where torch, an sm_90 GPU or NVRTC is missing): results against float64, the current torch
stream, CUDA-graph capture and replay of a call and of a compiled module (mode="reduce-overhead"), and
every bad input raising solder.ArgumentError before anything runs: a dtype or shape the kernel was not
compiled for, a CPU tensor handed to a CUDA kernel, a non-contiguous tensor."""
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the GPU tests are skipped")

import solder  # noqa: E402

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and solder.cuda_available()),
                                reason="needs an sm_90 GPU with its driver and NVRTC, and torch with CUDA")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOFTMAX = os.path.join(REPO, "examples", "softmax.sol")

RMSNORM_BF16 = """program rmsnorm_bf16
dim N = 64, L = 256
in x[N, L] : bf16
in g[L] : bf16
ss[n] = sum(l) x[n, l] * x[n, l]
out y[n, l] : bf16 = x[n, l] * rsqrt(ss[n] / L + 1e-6) * g[l]
"""


def _softmax64(x):
    return torch.softmax(x.double(), dim=-1)


def test_softmax_on_gpu_matches_float64():
    k = solder.compile(SOFTMAX, device="cuda", T=64, N=1000)
    assert k.device == "cuda"
    x = torch.randn(64, 1000, device="cuda")
    y = k(x)
    assert y.is_cuda and y.dtype == torch.float32 and y.shape == (64, 1000)
    torch.testing.assert_close(y.double(), _softmax64(x), rtol=1e-5, atol=1e-7)


def test_bf16_kernel_and_out_argument():
    k = solder.compile(RMSNORM_BF16, device="cuda")
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    out = torch.full((64, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = k(x, g, out=out)
    assert y is out
    xd = x.double()
    ref = xd * torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * g.double()
    torch.testing.assert_close(out.double(), ref, rtol=1.6e-2, atol=1e-2)


def test_runs_on_the_current_torch_stream():
    k = solder.compile(SOFTMAX, device="cuda", T=256, N=4096)
    x = torch.randn(256, 4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = torch.empty_like(x)
        for _ in range(3):
            k(x, out=y)
    # Work ordered after the kernel on the side stream sees its result.
    side.synchronize()
    torch.testing.assert_close(y.double(), _softmax64(x), rtol=1e-5, atol=1e-7)


def test_cuda_graph_capture_and_replay_of_a_call():
    k = solder.compile(SOFTMAX, device="cuda", T=32, N=512)
    x = torch.randn(32, 512, device="cuda")
    y = torch.empty_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        k(x, out=y)  # warm-up: the module is loaded before capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k(x, out=y)
    for seed in range(3):  # new data in the captured input, replay, fresh result
        torch.manual_seed(seed)
        x.copy_(torch.randn(32, 512, device="cuda") * (seed + 1))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y.double(), _softmax64(x), rtol=1e-5, atol=1e-7)


# Whole matrix products on the sm_90a GEMM skeleton (TMA tensor maps encoded per call): one that splits
# K (M 128, K 8192: f32 partials and self-resetting counters owned by the Kernel) and one that does not,
# with an epilogue; checked against float64, then captured in a CUDA graph and replayed on new data
# (a replay must find the split-K counters zero again).
SKINNY_GEMM = """program skinny
dim M = 128, N = 3072, K = 8192
in h[M, K] : bf16
in d[K, N] : bf16
out e[m, n] : bf16 = sum(k) h[m, k] * d[k, n]
"""

SCALED_GEMM = """program scaled
dim M = 512, N = 1024, K = 1024
in a[M, K] : bf16
in w[N, K] : bf16
in s[N] : f32
out y[m, n] : bf16 = sum(k) a[m, k] * w[n, k] * s[n]
"""


def _gemm_case(text):
    if text is SKINNY_GEMM:
        inputs = [torch.randn(128, 8192, device="cuda", dtype=torch.bfloat16),
                  torch.randn(8192, 3072, device="cuda", dtype=torch.bfloat16)]
        ref = lambda h, d: h.double() @ d.double()  # noqa: E731
    else:
        inputs = [torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16),
                  torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16),
                  torch.randn(1024, device="cuda")]
        ref = lambda a, w, s: (a.double() @ w.double().t()) * s.double()  # noqa: E731
    return inputs, ref


def _rel(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


@pytest.mark.parametrize("text", [SKINNY_GEMM, SCALED_GEMM], ids=["split_k", "epilogue"])
def test_gemm_skeleton_kernels_run_and_replay_in_a_graph(text):
    k = solder.compile(text, device="cuda")
    assert "sm90_gemm.cuh" in k.cuda_source(), "the product did not go to the GEMM skeleton:\n" + k.report_text()
    off = solder.compile(text, device="cuda", gemm_skeleton=False)
    assert "sm90_gemm.cuh" not in off.cuda_source()
    inputs, ref = _gemm_case(text)
    assert _rel(k(*inputs), ref(*inputs)) < 1e-2
    assert _rel(off(*inputs), ref(*inputs)) < 1e-2
    out = k(*inputs)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        k(*inputs, out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k(*inputs, out=out)
    for seed in range(3):
        torch.manual_seed(seed)
        fresh, _ = _gemm_case(text)
        for t, f in zip(inputs, fresh):
            t.copy_(f)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(out, ref(*inputs)) < 1e-2, f"replay {seed}"


def test_bad_inputs_raise_before_anything_runs():
    k = solder.compile(SOFTMAX, device="cuda", T=8, N=64)
    good = torch.randn(8, 64, device="cuda")
    with pytest.raises(solder.ArgumentError, match="expected dtype f32, found f16"):
        k(good.half())
    with pytest.raises(solder.ArgumentError, match="expected dtype f32, found bf16"):
        k(good.bfloat16())
    with pytest.raises(solder.ArgumentError, match=r"expected shape \[8,64\], found \[8,32\]"):
        k(good[:, :32].contiguous())
    with pytest.raises(solder.ArgumentError, match=r"expected shape \[8,64\], found \[64,8\]"):
        k(torch.randn(64, 8, device="cuda"))
    with pytest.raises(solder.ArgumentError, match="runs on the GPU .* is on cpu"):
        k(good.cpu())
    with pytest.raises(solder.ArgumentError, match="not contiguous"):
        k(torch.randn(64, 8, device="cuda").t())
    with pytest.raises(solder.ArgumentError, match="has no Solder dtype"):
        k(good.double())
    with pytest.raises(solder.ArgumentError, match="expected shape"):
        k(good, out=torch.empty(8, 65, device="cuda"))
    with pytest.raises(solder.ArgumentError, match="not contiguous"):
        k(good, out=torch.empty(64, 8, device="cuda").t())
    # Nothing was launched by the refused calls, and the kernel still works.
    torch.testing.assert_close(k(good).double(), _softmax64(good), rtol=1e-5, atol=1e-7)


def test_cpu_kernel_refuses_cuda_tensors():
    k = solder.compile(SOFTMAX, device="cpu", T=8, N=64)
    with pytest.raises(solder.ArgumentError, match="CPU executor"):
        k(torch.randn(8, 64, device="cuda"))


class _Attention(torch.nn.Module):
    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
        return torch.softmax(s, dim=-1) @ v


def test_compiled_module_under_reduce_overhead_cuda_graphs():
    # torch.compile's own CUDA graphs (cudagraph trees) around a graph with solder::call in it.
    import torch._dynamo

    from solder import torch_backend

    from torch._dynamo.utils import counters

    model = _Attention()
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda") for _ in range(3))
    torch._dynamo.reset()
    skips = counters["inductor"]["cudagraph_skips"]
    start = len(torch_backend._last_explanations)
    compiled = torch.compile(model, backend="solder", mode="reduce-overhead")
    with torch.no_grad():
        want = model(q, k, v)
        for _ in range(3):  # warm-up, record, replay
            got = compiled(q, k, v).clone()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert counters["inductor"]["cudagraph_skips"] == skips, "Inductor skipped CUDA graphs"
    found = torch_backend._last_explanations[start:]
    assert any(not p.get("error") for e in found for p in e.partitions), "\n".join(e.format() for e in found)
