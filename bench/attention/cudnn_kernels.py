#!/usr/bin/env python3
"""What cuDNN SDPA launches for causal and vanilla hd64 S 1k (B 16, H 16, bf16): each CUDA kernel's name,
grid, block, registers per thread, shared memory and duration, read from a torch.profiler (Kineto) trace
of three calls after a warm-up.

    cudnn_kernels.py            (prints one line per distinct kernel and case)
"""
import json
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile


def kernels(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(16, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    seen = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        key = (e["name"], str(a.get("grid")), str(a.get("block")))
        seen.setdefault(key, []).append((e.get("dur", 0.0), a))
    for (name, grid, block), xs in seen.items():
        a = xs[0][1]
        durs = sorted(d for d, _ in xs)
        print(f"{'causal' if causal else 'vanilla'}: {name} grid {grid} block {block} regs {a.get('registers per thread')} "
              f"smem {a.get('shared memory')} blocks/SM {a.get('blocks per SM')} occupancy {a.get('est. achieved occupancy %')} "
              f"durations µs {', '.join(f'{d:.1f}' for d in durs)}")


if __name__ == "__main__":
    print(torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name())
    kernels(True)
    kernels(False)
