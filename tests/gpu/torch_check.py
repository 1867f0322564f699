"""On an H100: every module of bench/torch_modules.py compiled with backend="solder" matches eager,
and CUDA-graph capture + replay of the compiled module gives the same outputs. Prints one line per
module and each module's partitions (solder.explain); exits 1 on any mismatch.

    python tests/gpu/torch_check.py [--modules a,b] [--dtype bf16|f32]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_modules  # noqa: E402

import solder  # noqa: E402,F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default=",".join(torch_modules.MODULES))
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}[args.dtype]
    tol = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (5e-3, 5e-3), torch.float32: (1e-4, 1e-4)}[dtype]
    failed = []
    for name in args.modules.split(","):
        module, inputs = torch_modules.make(name, dtype=dtype, small=args.small)
        try:
            with torch.no_grad():
                want = torch_modules.flat(module(*inputs))
                torch._dynamo.reset()
                solder.explain(module, *inputs)
                torch._dynamo.reset()
                compiled = torch.compile(module, backend="solder")
                got = torch_modules.flat(compiled(*inputs))
                for g, w in zip(got, want):
                    if w.dtype.is_floating_point:
                        torch.testing.assert_close(g, w, rtol=tol[0], atol=tol[1])
                    else:
                        assert torch.equal(g, w), "integer outputs differ"
                # CUDA-graph capture and replay of the compiled module.
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    compiled(*inputs)
                torch.cuda.current_stream().wait_stream(s)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    captured = torch_modules.flat(compiled(*inputs))
                graph.replay()
                torch.cuda.synchronize()
                for c, g in zip(captured, got):
                    assert torch.equal(c, g), "CUDA-graph replay differs from the direct call"
            print(f"ok    {name}")
        except Exception as e:
            failed.append(name)
            print(f"FAIL  {name}: {type(e).__name__}: {e}")
    print(f"{len(args.modules.split(',')) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
