"""solder.compile and Kernel: compile .sol programs and call them on DLPack tensors (NumPy, torch)."""
from __future__ import annotations

import json
import os
import threading

try:
    from . import _solder  # installed by pip
except ImportError:  # a build tree: PYTHONPATH=python:build/python (scripts/test.sh)
    import _solder
from .errors import ArgumentError

_NUMPY_DTYPES = {"f32": "float32", "f16": "float16", "i32": "int32", "bool": "bool"}
_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "bool": "bool"}

_cache: dict = {}
_cache_lock = threading.Lock()


def cuda_available() -> bool:
    """Whether compiled kernels can run on a GPU here (an sm_90 GPU, its driver and NVRTC)."""
    return _solder.cuda_available()[0]


def _looks_like_source(text: str) -> bool:
    return "\n" in text or text.lstrip().startswith("program ")


def compile(source, *, device: str = "auto", small: bool = False, fuse: bool = True, gemm_skeleton: bool = True,
            **dims) -> "Kernel":
    """Compile a program and return a callable Kernel.

    ``source`` is .sol text, or the path of a .sol file. ``dims`` override the program's dims
    (``solder.compile(text, T=8, N=64)``). ``device`` is "auto" (the GPU when an sm_90 GPU, its driver
    and NVRTC are present, else the CPU executor), "cpu" or "cuda". ``gemm_skeleton`` (GPU only): whole
    matrix products run on the sm_90a GEMM skeleton (TMA + wgmma) as the ``solder`` command runs them;
    False keeps every contraction in the fused kernels.

    Compiling the same program with equal dims again returns the same Kernel from an in-process cache;
    a new set of dims compiles once, and its CUDA binary is cached on disk (NVRTC's cache,
    ``$SOLDER_CACHE_DIR`` or ``~/.cache/solder``), so another process reuses it.
    """
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _looks_like_source(source)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ArgumentError(f"solder.compile: '{path}' is neither .sol text nor an existing file")
        with open(path, encoding="utf-8") as f:
            text, file = f.read(), path
    elif isinstance(source, str):
        text, file = source, "<program>"
    else:
        raise ArgumentError(f"solder.compile: expected .sol text or a path, found {type(source).__name__}")
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentError(f"solder.compile: dim {name} must be an int, found {value!r}")
    key = (text, file, tuple(sorted(dims.items())), small, fuse, device, bool(gemm_skeleton))
    with _cache_lock:
        kernel = _cache.get(key)
    if kernel is not None:
        return kernel
    program = _solder.NativeProgram.from_text(text, file)
    kernel = Kernel(program.compile(dict(dims), small, fuse, device, bool(gemm_skeleton)), program)
    with _cache_lock:
        _cache.setdefault(key, kernel)
        return _cache[key]


def cache_info() -> dict:
    """Entries of the in-process compile cache."""
    with _cache_lock:
        return {"entries": len(_cache)}


def _framework(x) -> str:
    module = type(x).__module__
    if module.startswith("torch"):
        return "torch"
    if module.startswith("numpy"):
        return "numpy"
    if module.startswith("cupy"):
        return "cupy"
    return "other"


class Kernel:
    """A compiled program. Call it with one tensor per input, in the program's order:

    ``outputs = kernel(*tensors, out=None, stream=None)``

    Tensors are anything with DLPack or the buffer protocol (torch, NumPy, CuPy, JAX) and are used in
    place, never copied: host tensors for a kernel on the CPU executor, CUDA tensors for a GPU kernel.
    Each must have exactly the dtype and shape the kernel was compiled for (``inputs``) and be
    contiguous. With ``out=None`` the outputs are allocated by the first input's framework (NumPy for
    NumPy, torch for torch, on the same device); ``out`` may give them (a tensor or a tuple). The call
    returns the output (one) or a tuple of outputs. On the GPU it launches on ``stream`` (a CUDA stream
    handle or a torch.cuda.Stream), by default the current torch stream of the inputs' device.
    """

    def __init__(self, native, program=None):
        self._native = native
        self._program = program

    # ---- What it is -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._native.name

    @property
    def device(self) -> str:
        """ "cpu" (the CPU executor) or "cuda"."""
        return self._native.device

    @property
    def dims(self) -> dict:
        return dict(self._native.dims)

    @property
    def inputs(self) -> list:
        """[(name, shape, dtype)] in call order."""
        return [(n, tuple(s), d) for n, s, d in self._native.inputs]

    @property
    def outputs(self) -> list:
        return [(n, tuple(s), d) for n, s, d in self._native.outputs]

    @property
    def workspace_bytes(self) -> int:
        """Bytes of device memory for the intermediate tensors (allocated per call from torch's caching
        allocator for torch tensors; otherwise the kernel's own, allocated once at compile time)."""
        return self._native.workspace_bytes

    @property
    def kernel_count(self) -> int:
        return self._native.kernel_count

    def report(self) -> dict:
        """The fusion report as Python objects: kernels, what each holds, the derivations of the online
        forms of cascaded reductions, refused fusions (``solder fuse --json``); and under ``"schedule"``
        the lines of :meth:`schedule`: where each contraction runs on the GPU."""
        report = json.loads(self._native.report_json())
        report["schedule"] = self.schedule()
        return report

    def schedule(self) -> list:
        """Where each contraction runs on the GPU, one line per contraction as ``solder emit --cuda
        --report`` prints it: the sm90 GEMM or attention skeleton (configuration, work tiles, skipped
        tiles, a staged bias), the tensor-core emitter, or scalar code and why. A CUDA kernel's own
        kernels; for a CPU kernel, the plan the CUDA backend would make (skeletons on, no GPU needed)."""
        return [line for line in self._native.schedule_text().splitlines() if line]

    def report_text(self) -> str:
        return self._native.report_text()

    def kernel_ir(self) -> str:
        return self._native.kernel_ir()

    def cuda_source(self) -> str:
        return self._native.cuda_source()

    def __repr__(self):
        ins = ", ".join(f"{n}{list(s)}:{d}" for n, s, d in self.inputs)
        outs = ", ".join(f"{n}{list(s)}:{d}" for n, s, d in self.outputs)
        return f"<solder.Kernel {self.name} ({ins}) -> ({outs}) on {self.device}, {self.kernel_count} kernel(s)>"

    # ---- Calls --------------------------------------------------------------------------------------
    def allocate_outputs(self, like=None):
        """Empty output tensors for a call, from the framework of ``like`` (NumPy when None)."""
        framework = _framework(like) if like is not None else "numpy"
        outs = []
        for name, shape, dtype in self.outputs:
            if framework == "torch":
                import torch

                outs.append(torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device=like.device))
            elif framework == "cupy":
                import cupy

                if dtype not in _NUMPY_DTYPES:
                    raise ArgumentError(f"kernel '{self.name}': output '{name}' is {dtype}, which CuPy has no dtype for: pass out=")
                outs.append(cupy.empty(shape, dtype=_NUMPY_DTYPES[dtype]))
            else:
                import numpy

                if self.device == "cuda":
                    raise ArgumentError(f"kernel '{self.name}' runs on the GPU: pass torch or CuPy tensors, or out=")
                if dtype not in _NUMPY_DTYPES:
                    raise ArgumentError(f"kernel '{self.name}': output '{name}' is {dtype}, which NumPy has no dtype for: pass out= (a torch tensor)")
                outs.append(numpy.empty(shape, dtype=_NUMPY_DTYPES[dtype]))
        return outs

    def __call__(self, *tensors, out=None, stream=None):
        if len(tensors) != len(self.inputs):
            names = ", ".join(n for n, _, _ in self.inputs)
            raise ArgumentError(f"call of kernel '{self.name}': expected {len(self.inputs)} inputs ({names}), found {len(tensors)}")
        if out is None:
            outs = self.allocate_outputs(tensors[0] if tensors else None)
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for t in list(tensors) + outs:
            _check_layout(self, t)
        workspace, stream_handle, keep = 0, 0, None
        if self.device == "cuda":
            stream_handle, keep, workspace = self._cuda_launch_state(tensors, outs, stream)
        self._native.call(list(tensors), outs, workspace, stream_handle)
        del keep
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _cuda_launch_state(self, tensors, outs, stream):
        torch_tensor = next((t for t in list(tensors) + outs if _framework(t) == "torch"), None)
        keep = None
        workspace = 0
        if torch_tensor is not None:
            import torch

            if not torch_tensor.is_cuda:
                raise ArgumentError(f"call of kernel '{self.name}': the kernel runs on the GPU (cuda) but a tensor is on {torch_tensor.device}: move it to the GPU first")
            if self.workspace_bytes:
                keep = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=torch_tensor.device)
                workspace = keep.data_ptr()
            if stream is None:
                stream = torch.cuda.current_stream(torch_tensor.device)
        if stream is None:
            return 0, keep, workspace
        handle = getattr(stream, "cuda_stream", stream)
        handle = getattr(handle, "ptr", handle)  # cupy streams
        return int(handle), keep, workspace


def _check_layout(kernel, t):
    """Non-contiguous tensors are refused before DLPack sees them (clear message, no copy)."""
    framework = _framework(t)
    if framework == "torch":
        if not t.is_contiguous():
            raise ArgumentError(f"call of kernel '{kernel.name}': a tensor of shape {tuple(t.shape)} is not contiguous (strides {t.stride()}); Solder's kernels take contiguous tensors: call .contiguous() first")
        if kernel.device == "cpu" and t.is_cuda:
            raise ArgumentError(f"call of kernel '{kernel.name}': the kernel runs on the CPU executor but a tensor is on {t.device}: compile with device='cuda' or pass CPU tensors")
    elif framework == "numpy":
        if not t.flags.c_contiguous:
            raise ArgumentError(f"call of kernel '{kernel.name}': a NumPy array of shape {t.shape} is not C-contiguous (strides {t.strides}); Solder's kernels take contiguous tensors: use numpy.ascontiguousarray first")
