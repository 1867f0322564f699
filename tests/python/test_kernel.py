"""solder.compile and Kernel on the CPU executor, with NumPy: results against float64 NumPy, the
compile cache, the report, and every bad input raising a SolderError subclass."""
import os

import numpy as np
import pytest

import solder

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOFTMAX = os.path.join(REPO, "examples", "softmax.sol")

RMSNORM = """program rmsnorm
dim N = 16, L = 64
in x[N, L] : f32
in g[L] : f32
ss[n] = sum(l) x[n, l] * x[n, l]
out y[n, l] : f32 = x[n, l] * rsqrt(ss[n] / L + 1e-6) * g[l]
"""


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_from_path_matches_numpy():
    k = solder.compile(SOFTMAX, device="cpu", T=6, N=50)
    assert k.device == "cpu"
    assert k.inputs == [("x", (6, 50), "f32")]
    assert k.outputs == [("y", (6, 50), "f32")]
    x = np.random.default_rng(0).standard_normal((6, 50)).astype(np.float32)
    y = k(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (6, 50)
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_out_is_written_in_place_and_returned():
    k = solder.compile(RMSNORM, device="cpu", N=5, L=33)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 33)).astype(np.float32)
    g = rng.standard_normal(33).astype(np.float32)
    out = np.full((5, 33), np.nan, dtype=np.float32)
    y = k(x, g, out=out)
    assert y is out
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6)


def test_two_outputs_topk():
    src = """program router
dim T = 8, E = 16, K = 2
in logits[T, E] : f32
out val[t, r], out idx[t, r] : i32 = topk(K, e) logits[t, e]
"""
    k = solder.compile(src, device="cpu", T=4, E=10, K=3)
    x = np.random.default_rng(2).standard_normal((4, 10)).astype(np.float32)
    val, idx = k(x)
    assert idx.dtype == np.int32
    order = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(val, np.take_along_axis(x, order, axis=1))


def test_compile_cache_reuses_equal_dims():
    a = solder.compile(SOFTMAX, device="cpu", T=3, N=7)
    b = solder.compile(SOFTMAX, device="cpu", N=7, T=3)
    c = solder.compile(SOFTMAX, device="cpu", T=3, N=9)
    assert a is b
    assert c is not a and c.dims["N"] == 9


def test_gemm_skeleton_option_is_part_of_the_cache_key():
    # On the CPU executor the option changes nothing (the skeleton is a GPU path), but it is accepted and
    # kernels compiled with and without it are cached apart.
    a = solder.compile(SOFTMAX, device="cpu", T=3, N=7)
    b = solder.compile(SOFTMAX, device="cpu", T=3, N=7, gemm_skeleton=False)
    assert a is not b
    assert b is solder.compile(SOFTMAX, device="cpu", T=3, N=7, gemm_skeleton=False)
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    np.testing.assert_allclose(b(x), softmax_ref(x), rtol=1e-5, atol=1e-7)


def test_report_is_python_objects():
    k = solder.compile(SOFTMAX, device="cpu", T=3, N=7)
    report = k.report()
    assert isinstance(report, dict)
    text = repr(report)
    assert "kernel" in text
    assert k.kernel_count >= 1
    assert "kernel" in k.kernel_ir()
    assert "softmax" in repr(k)


# Evoformer's row attention as the torch backend writes it: the pair bias z is added to the scores.
PAIR_BIAS = """program pair_bias_attention
dim S = 128, H = 8, R = 256, C = 32
in k[S, H, R, C] : bf16
in q[S, H, R, C] : bf16
in z[H, R, R] : bf16
in v[S, H, R, C] : bf16
t1[s, h, i, j] : f32 = sum(c) q[s, h, i, c] * k[s, h, j, c] * 0.17677669529663687
t2[s, h, i] : f32 = max(j) (t1[s, h, i, j] + z[h, i, j])
t3[s, h, i] : f32 = sum(j) exp(t1[s, h, i, j] + z[h, i, j] - t2[s, h, i])
out y[s, h, i, c] : bf16 = sum(j) exp(t1[s, h, i, j] + z[h, i, j] - t2[s, h, i]) / t3[s, h, i] * v[s, h, j, c]
"""


def test_schedule_says_where_contractions_run():
    # A CPU kernel's schedule is the CUDA backend's plan (no GPU needed): both contractions of the
    # attention on the sm90 attention skeleton, the pair bias staged as a tile (StagedBias 1, whatever
    # Config arguments follow it: a second Q buffer since evoformer3).
    k = solder.compile(PAIR_BIAS, device="cpu")
    lines = k.schedule()
    assert len(lines) == 2, lines
    assert all("sm90 attention skeleton" in line and "6, 2, true, 1" in line for line in lines), lines
    assert k.report()["schedule"] == lines
    assert solder.compile(SOFTMAX, device="cpu", T=3, N=7).schedule() == []


def test_program_error_has_file_line_column(tmp_path):
    bad = tmp_path / "bad.sol"
    bad.write_text("program p\ndim N = 4\nin x[N] : f32\nout y[n] = x[n] * zz[n]\n")
    with pytest.raises(solder.ProgramError) as info:
        solder.compile(str(bad), device="cpu")
    e = info.value
    assert isinstance(e, solder.SolderError)
    assert e.file == str(bad) and e.line == 4 and e.column > 0
    assert str(e).startswith(f"{bad}:4:")
    assert "zz" in str(e)


def test_bad_dims_and_arguments():
    with pytest.raises(solder.ArgumentError, match="no dim 'Q'"):
        solder.compile(SOFTMAX, device="cpu", Q=3)
    with pytest.raises(solder.ArgumentError, match="must be an int"):
        solder.compile(SOFTMAX, device="cpu", T=2.5)
    with pytest.raises(solder.ArgumentError, match="neither .sol text nor an existing file"):
        solder.compile("no/such/file.sol")
    k = solder.compile(SOFTMAX, device="cpu", T=2, N=4)
    with pytest.raises(solder.ArgumentError, match="expected dtype f32, found f16"):
        k(np.zeros((2, 4), np.float16))
    with pytest.raises(solder.ArgumentError, match=r"expected shape \[2,4\], found \[4,2\]"):
        k(np.zeros((4, 2), np.float32))
    with pytest.raises(solder.ArgumentError, match="not C-contiguous"):
        k(np.zeros((4, 2), np.float32).T)
    with pytest.raises(solder.ArgumentError, match="has no Solder dtype"):
        k(np.zeros((2, 4), np.float64))
    with pytest.raises(solder.ArgumentError, match="expected 1 inputs"):
        k()
    with pytest.raises(solder.ArgumentError, match="expected shape"):
        k(np.zeros((2, 4), np.float32), out=np.zeros((2, 5), np.float32))


@pytest.mark.skipif(solder.cuda_available(), reason="this machine has a GPU")
def test_cuda_kernel_refused_without_gpu():
    with pytest.raises(solder.SolderError, match="cannot run here"):
        solder.compile(SOFTMAX, device="cuda", T=2, N=4)


def test_every_example_compiles_small():
    # Every example of the library compiles at its small sizes from Python (no run: some are slow on the CPU).
    examples = sorted(f for f in os.listdir(os.path.join(REPO, "examples")) if f.endswith(".sol"))
    assert examples
    for name in examples:
        k = solder.compile(os.path.join(REPO, "examples", name), device="cpu", small=True)
        assert k.kernel_count >= 1, name
