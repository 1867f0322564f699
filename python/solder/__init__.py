"""Solder: a kernel-fusion compiler, from Python (docs/python.md).

    import numpy as np, solder
    k = solder.compile(open("examples/softmax.sol").read(), T=8, N=64)
    y = k(np.random.randn(8, 64).astype(np.float32))

``torch.compile(model, backend="solder")`` works once ``solder`` is imported (and through the
``torch_dynamo_backends`` entry point of the installed package); ``solder.explain(model, *inputs)``
prints what the backend translates and why the rest falls back to Inductor.
"""
import importlib.util as _importlib_util
import os as _os

from .errors import ArgumentError, ProgramError, SolderError, UnsupportedError
from ._kernel import Kernel, cache_info, compile, cuda_available

__version__ = "0.1.0"
__all__ = ["compile", "Kernel", "cuda_available", "cache_info", "explain", "SolderError", "ProgramError",
           "ArgumentError", "UnsupportedError"]


def explain(model, *inputs, file=None, options=None):
    """Print (and return) how the torch.compile backend partitions ``model`` for these inputs: each
    Solder partition with its generated program, and every node left to Inductor with the reason.
    ``options`` as for ``torch.compile(..., backend="solder", options=...)``."""
    from .torch_backend import explain as _explain

    return _explain(model, *inputs, file=file, options=options)


# Register backend="solder" with torch.compile when torch is installed (SOLDER_NO_TORCH=1 skips it).
if _os.environ.get("SOLDER_NO_TORCH") != "1" and _importlib_util.find_spec("torch") is not None:
    try:
        from . import torch_backend as _torch_backend

        _torch_backend.register()
    except ImportError:  # a torch too old for the backend: solder.compile still works
        pass
