#!/usr/bin/env python3
"""The peer's linear_relu_backward split into its parts (bench/peers.py, linear_relu_backward_plain), each
timed alone: g = where(z > 0, dy, 0) (eager and torch.compile default), dx = g @ w.T and
dw = (x.T @ g).float() (cuBLAS, f16), so that Solder's per-kernel times (ncu) have a counterpart.

    python3 bench/lrb_dw_torch_parts.py [N CI CO]

CUDA events around CUDA-graph replays of 20 calls each, median of 30 replays (bench/common/graph_timing.py),
inputs rotated over three sets (each set is larger than the 50 MB L2 at the default sizes). Prints one line per part.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from graph_timing import median_us  # noqa: E402

N, CI, CO = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (65536, 256, 256)
dev = torch.device("cuda")
torch.manual_seed(1)
sets = []
for _ in range(3):
    sets.append(dict(x=torch.randn(N, CI, device=dev, dtype=torch.float16), w=torch.randn(CI, CO, device=dev, dtype=torch.float16) * 0.05,
                     z=torch.randn(N, CO, device=dev, dtype=torch.float16), dy=torch.randn(N, CO, device=dev, dtype=torch.float16)))
for s in sets:
    s["g"] = torch.where(s["z"] > 0, s["dy"], 0)


def mask(z, dy):
    return torch.where(z > 0, dy, 0)


mask_compiled = torch.compile(mask)
parts = {
    "g eager": lambda s: mask(s["z"], s["dy"]),
    "g compile": lambda s: mask_compiled(s["z"], s["dy"]),
    "dx = g @ w.T": lambda s: s["g"] @ s["w"].t(),
    "dw = (x.T @ g).float()": lambda s: (s["x"].t() @ s["g"]).float(),
    "dw = x.T @ g (f16)": lambda s: s["x"].t() @ s["g"],
}
calls = 20
for name, fn in parts.items():
    us = median_us(fn, arg_sets=[(s,) for s in sets], calls=calls, replays=30, warm=3)
    print("torch part %-24s N %d CI %d CO %d: %8.2f us" % (name, N, CI, CO, us), flush=True)
