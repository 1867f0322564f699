#!/usr/bin/env python3
"""The peers of bench_gemm headline, timed the same way: CUDA events around CUDA-graph replays, median.

bf16 8192^3: torch.matmul (cuBLAS) of A (M x K) and B (N x K) transposed, bf16 out.
fp8 e4m3 8192^3: torch._scaled_mm with per-row (M x 1) and per-column (1 x N) f32 scales, bf16 out.
Prints one line per peer and writes JSON (argv[1]) with {"peers": [{"name", "m", "n", "k", "ms", "tflops"}]}.
`peer.py JSON splitk`: instead, cuBLAS f16 at the M = 128 shapes of bench_gemm splitk (N 3072 K 8192,
N 4096 K 11008, N 8192 K 3072), B K-major (torch.matmul(a, b.t())) and N-major (torch.matmul(a, w), w K x N).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from graph_timing import median_us  # noqa: E402


def time_graph(fn, flops, replays=15):
    """Median ms per call: one graph of 2–50 calls (about 2 TFLOP in all)."""
    return median_us(fn, calls=max(2, min(50, int(2e12 / flops))), replays=replays) / 1e3


def splitk(out):
    peers = []
    torch.manual_seed(0)
    for m, n, k in [(128, 3072, 8192), (128, 4096, 11008), (128, 8192, 3072)]:
        flops = 2.0 * m * n * k
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, k, device="cuda", dtype=torch.float16)
        w = b.t().contiguous()  # K x N, N contiguous: the layout of examples/ffn.sol's weights
        for name, fn in [("cublas_f16 B:K (torch.matmul)", lambda: torch.matmul(a, b.t())),
                         ("cublas_f16 B:N (torch.matmul)", lambda: torch.matmul(a, w))]:
            ms = time_graph(fn, flops, replays=31)
            peers.append({"name": name, "dtype": "f16", "m": m, "n": n, "k": k, "ms": ms, "tflops": flops / ms / 1e9})
            print(f"peer   {name:<30} M={m} N={n} K={k} {ms:9.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s")
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "peers": peers}, f, indent=2)


def f32(out):
    peers = []
    torch.manual_seed(0)
    for n in (4096, 8192):
        flops = 2.0 * n * n * n
        a = torch.randn(n, n, device="cuda", dtype=torch.float32)
        b = torch.randn(n, n, device="cuda", dtype=torch.float32)
        for rnd in (1, 2):
            for tf32 in (False, True):
                torch.backends.cuda.matmul.allow_tf32 = tf32  # read when the graph is captured
                name = "cublas_f32 1xTF32 allow_tf32=True" if tf32 else "cublas_f32 SGEMM allow_tf32=False"
                ms = time_graph(lambda: torch.matmul(a, b), flops)
                # Accuracy on 256 sampled outputs: max |error| / sum |a b| against float64.
                c = torch.matmul(a, b)
                g = torch.Generator(device="cpu").manual_seed(7)
                rows = torch.randint(0, n, (256,), generator=g).cuda()
                cols = torch.randint(0, n, (256,), generator=g).cuda()
                prod = a[rows].double() * b[:, cols].t().double()
                err = c[rows, cols].double() - prod.sum(1)
                worst = (err.abs() / prod.abs().sum(1)).max().item()
                rel_l2 = (err.norm() / prod.sum(1).norm()).item()
                peers.append({"name": name, "dtype": "f32", "round": rnd, "m": n, "n": n, "k": n, "ms": ms,
                              "tflops": flops / ms / 1e9, "worst_rel_sum_abs": worst, "rel_l2": rel_l2})
                print(f"peer   {name:<36} M={n} N={n} K={n} round {rnd} {ms:9.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s"
                      f"  worst/sum|ab| {worst:.2e} rel_l2 {rel_l2:.2e}")
        torch.backends.cuda.matmul.allow_tf32 = False
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "peers": peers}, f, indent=2)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    if len(sys.argv) > 2 and sys.argv[2] == "splitk":
        return splitk(out)
    if len(sys.argv) > 2 and sys.argv[2] == "f32":
        return f32(out)
    m = n = k = 8192
    flops = 2.0 * m * n * k
    peers = []
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    ms = time_graph(lambda: torch.matmul(a, b.t()), flops)
    peers.append({"name": "cublas_bf16 (torch.matmul)", "dtype": "bf16", "m": m, "n": n, "k": k, "ms": ms,
                  "tflops": flops / ms / 1e9})
    a8 = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
    b8 = (torch.rand(n, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
    sa = torch.full((m, 1), 0.5, device="cuda", dtype=torch.float32)
    sb = torch.full((1, n), 0.25, device="cuda", dtype=torch.float32)
    try:
        ms = time_graph(lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), flops)
        peers.append({"name": "scaled_mm_e4m3 rowwise (torch._scaled_mm)", "dtype": "e4m3", "m": m, "n": n, "k": k,
                      "ms": ms, "tflops": flops / ms / 1e9})
    except RuntimeError as error:  # rowwise scaling unsupported: fall back to tensor-wise scales
        print("rowwise _scaled_mm failed:", error)
    one = torch.tensor(1.0, device="cuda")
    ms = time_graph(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), flops)
    peers.append({"name": "scaled_mm_e4m3 tensorwise (torch._scaled_mm)", "dtype": "e4m3", "m": m, "n": n, "k": k,
                  "ms": ms, "tflops": flops / ms / 1e9})
    for p in peers:
        print(f"peer   {p['name']:<45} M={m} N={n} K={k} {p['ms']:9.4f} ms {p['tflops']:7.1f} TFLOP/s")
    if out:
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "peers": peers}, f, indent=2)


if __name__ == "__main__":
    main()
