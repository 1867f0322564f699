"""Peers for bench/programs/silu_mul.sol and rmsnorm.sol at the run-8 shapes (Llama MLP, 512 tokens):
torch.compile (Inductor's Triton kernels) and eager, bf16, CUDA-graph replays timed with CUDA events,
median of 30, inputs rotated through copies larger than L2 together (as `solder bench` does). Prints one line per case: name, µs, floor µs (bytes once at 3.0 TB/s).
Usage: python bench/programs/pointwise_peers.py  (needs torch with CUDA)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from graph_timing import median_us  # noqa: E402


def silu_mul(g, u):
    return torch.nn.functional.silu(g) * u


def rmsnorm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def time_graph(fn, copies, replays=30):
    """µs per call: one graph calls fn on each copy of the inputs in turn (together larger than the
    50 MB L2, as `solder bench` rotates its inputs), timed over the whole graph."""
    return median_us(fn, copies, replays=replays)


def main():
    dev = torch.device("cuda")

    def bf16(*shape, mean=0.0, std=1.0):
        return (mean + std * torch.randn(*shape, device=dev)).to(torch.bfloat16)

    silu_bytes, rms_bytes = 3 * 512 * 11008 * 2, 2 * 512 * 4096 * 2 + 4096 * 2
    cases = [
        ("silu_mul", silu_mul, [(bf16(512, 11008), bf16(512, 11008)) for _ in range(6)], silu_bytes),
        ("rmsnorm", rmsnorm, [(bf16(512, 4096), bf16(4096, mean=1.0, std=0.1)) for _ in range(20)], rms_bytes),
    ]
    for name, fn, copies, nbytes in cases:
        floor = nbytes / 3.0e12 * 1e6
        for variant, f in (("compile", torch.compile(fn)), ("eager", fn)):
            try:
                us = time_graph(f, copies)
                print(f"peer {name:10} {variant:8} {us:8.2f} us  floor {floor:6.2f} us  x{us / floor:5.2f}", flush=True)
            except Exception as e:  # a peer that fails must not hide Solder's numbers
                print(f"peer {name:10} {variant:8} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
