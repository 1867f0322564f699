#!/usr/bin/env python3
"""The GEMM skeleton alone at 8192^3 (issue 15's first target): the peers and this device's ceilings, in one
process, as JSON lines (suite15's call, bench/suite15/call.sh).

    python3 bench/suite15/skeleton_peers.py OUT.jsonl

- a "ceiling" record: bench/peers.py's measure_ceilings (1 GiB device-to-device copy, bf16 and fp8
  8192^3 matmuls on random data), the rates the table's floors use (bench/suite15/table.py);
- one "skeleton_peer" record per peer, timed by bench/common/graph_timing.py (CUDA events around replays of
  one CUDA graph, median) on random data: cuBLAS bf16 (torch.matmul(a, b.t()), A M x K, B N x K, bf16 out)
  and torch._scaled_mm e4m3 with row-wise scales (scale_a M x 1, scale_b 1 x N) and tensor-wise scales, bf16
  out, as bench/gemm/peer.py times them. Each record carries "timed_span_ms" (epoch ms around its timing),
  which bench/merged_table.py's clock join reads.
"""
import datetime
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import peers  # noqa: E402
from graph_timing import median_us  # noqa: E402

M = N = K = 8192


def main(argv):
    out = open(argv[1], "a")
    dev = torch.device("cuda")
    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "commit": os.environ.get("SOLDER_COMMIT", "unknown"),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    t0 = time.time()
    c = peers.measure_ceilings(dev)
    out.write(json.dumps({"record": "ceiling", **c, **env, "timed_span_ms": [int(t0 * 1e3), int(time.time() * 1e3)]}) + "\n")
    out.flush()
    print("ceilings", json.dumps(c), flush=True)
    flops = 2.0 * M * N * K
    torch.manual_seed(0)
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
    a8 = (torch.rand(M, K, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
    b8 = (torch.rand(N, K, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
    sa = torch.rand(M, 1, device=dev, dtype=torch.float32) * 0.009 + 0.001
    sb = torch.ones(1, N, device=dev, dtype=torch.float32)
    one = torch.tensor(1.0, device=dev)
    cases = [("cublas_bf16", "bf16", lambda: torch.matmul(a, b.t())),
             ("scaled_mm_rowwise", "e4m3",
              lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)),
             ("scaled_mm_tensorwise", "e4m3",
              lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))]
    for name, dtype, fn in cases:
        rec = {"record": "skeleton_peer", "peer": name, "dtype": dtype, "m": M, "n": N, "k": K, **env}
        t = time.time()
        try:
            us = median_us(fn, calls=4, replays=21)
            rec.update(status="ok", median_us=us, tflops=flops / us / 1e6)
        except RuntimeError as e:
            rec.update(status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
        rec["timed_span_ms"] = [int(t * 1e3), int(time.time() * 1e3)]
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(name, rec.get("median_us"), rec.get("tflops"), rec.get("error", ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
