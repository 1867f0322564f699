#!/usr/bin/env python3
"""The peers of bench_attention table, timed the same way: CUDA events around CUDA-graph replays, median.

torch.nn.functional.scaled_dot_product_attention on bf16 q, k, v of shape (B, H, S, D) (the suite's
16k tokens, H 16, B = 16384 / S), S 1k/4k/16k, D 64/128, is_causal False/True, under
sdpa_kernel(CUDNN_ATTENTION) and sdpa_kernel(FLASH_ATTENTION) (FlashAttention-2 in torch 2.11).
Prints one line per measurement and writes JSON (argv[1]): {"peers": [{"name", "seq", "dim", "causal",
"ms", "tflops"}]}. A backend that refuses a shape or graph capture is reported and skipped.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from graph_timing import median_us  # noqa: E402


def time_graph(fn, flops, replays=15):
    """Median ms per call: one graph of 2–50 calls (about 2 TFLOP in all)."""
    return median_us(fn, calls=max(2, min(50, int(2e12 / flops))), replays=replays) / 1e3


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    peers = []
    heads, tokens = 16, 16384
    backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]
    for seq in (1024, 4096, 16384):
        batch = tokens // seq
        for dim in (64, 128):
            g = torch.Generator(device="cuda").manual_seed(seq + dim)
            q = (torch.rand(batch, heads, seq, dim, device="cuda", generator=g) * 4 - 2).to(torch.bfloat16)
            k = (torch.rand(batch, heads, seq, dim, device="cuda", generator=g) * 4 - 2).to(torch.bfloat16)
            v = (torch.rand(batch, heads, seq, dim, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
            for causal in (False, True):
                flops = 4.0 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
                for name, backend in backends:
                    def fn():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    try:
                        ms = time_graph(fn, flops)
                    except RuntimeError as error:
                        print(f"peer   {name} S={seq} D={dim} causal={causal}: failed: {str(error)[:200]}")
                        continue
                    peers.append({"name": name, "batch": batch, "heads": heads, "seq": seq, "dim": dim,
                                  "causal": causal, "ms": ms, "tflops": flops / ms / 1e9})
                    print(f"peer   {'causal' if causal else 'vanilla':<7} d{dim:<3} S={seq:<6} B={batch:<3} H={heads} "
                          f"{name:<14} {ms:9.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "peers": peers}, f, indent=2)


if __name__ == "__main__":
    main()
