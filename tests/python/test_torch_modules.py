"""The modules of tests/gpu/torch.sh (bench/torch_modules.py) at small shapes, in f32 on the CPU:
torch.compile(backend="solder") matches eager, and Solder's kernels take part of each graph."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/test.sh installs it from PyPI unless SOLDER_TEST_TORCH=0): the torch.compile backend tests are skipped")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_modules  # noqa: E402

import solder  # noqa: E402,F401
from solder import torch_backend  # noqa: E402


@pytest.mark.parametrize("name", sorted(torch_modules.MODULES))
def test_module_matches_eager_on_cpu(name):
    import torch._functorch.config
    import torch._inductor.config

    module, inputs = torch_modules.make(name, device="cpu", dtype=torch.float32, small=True)
    torch._dynamo.reset()
    start = len(torch_backend._last_explanations)
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        want = torch_modules.flat(module(*inputs))
        got = torch_modules.flat(torch.compile(module, backend="solder")(*inputs))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        else:
            assert torch.equal(g, w)
    found = torch_backend._last_explanations[start:]
    assert found and any(not p.get("error") for e in found for p in e.partitions), "\n".join(e.format() for e in found)
