"""On an H100: every module of bench/torch_modules.py compiled with backend="solder" matches a float32
reference as well as eager does (bench/torch_modules.py `compare`: relative L2 error within
max(tolerance of the dtype, 2 × eager's error); integer outputs equal to eager's in ≥ 99 % of places),
and CUDA-graph capture + replay of the compiled module gives the same outputs as the direct call; with
--reduce-overhead also torch.compile(mode="reduce-overhead") (Inductor's CUDA graphs around solder::call).
Prints one line per module and each module's partitions (solder.explain); exits 1 on any mismatch.

    python tests/gpu/torch_check.py [--modules a,b] [--dtype bf16|f32] [--small] [--reduce-overhead]
                                    [--linear inductor|solder|gated] [--device cpu]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch_modules  # noqa: E402

import solder  # noqa: E402,F401


def capture_and_replay(fn, inputs):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(*inputs)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = torch_modules.flat(fn(*inputs))
    for t in captured:  # poison: the replay must write every output again
        t.fill_(float("nan") if t.dtype.is_floating_point else -1)
    graph.replay()
    torch.cuda.synchronize()
    return captured


def check(name, dtype, small, reduce_overhead, options, device="cuda"):
    import torch._dynamo

    module, inputs = torch_modules.make(name, device=device, dtype=dtype, small=small)
    with torch.no_grad():
        eager = torch_modules.flat(module(*inputs))
        ref = torch_modules.reference(module, inputs)
        torch._dynamo.reset()
        found = solder.explain(module, *inputs, options=options)
        if not any(not p.get("error") for e in found for p in e.partitions):
            return "no partition ran on Solder"
        torch._dynamo.reset()
        compiled = torch.compile(module, backend="solder", options=options)
        got = torch_modules.flat(compiled(*inputs))
        why = torch_modules.compare(got, ref, eager, dtype, torch_modules.INDEX_CHECKS.get(name), module, inputs)
        if why:
            return why
        if device == "cpu":  # a dry run: no CUDA graphs
            return None
        for c, g in zip(capture_and_replay(compiled, inputs), got):
            if not torch.equal(c, g):
                return "CUDA-graph replay of the compiled module differs from the direct call"
        if reduce_overhead:
            torch._dynamo.reset()
            from torch._dynamo.utils import counters

            skips = counters["inductor"]["cudagraph_skips"]
            fn = torch.compile(module, backend="solder", mode="reduce-overhead", options=options)
            for _ in range(3):  # warm-up, record, replay
                out = [t.clone() for t in torch_modules.flat(fn(*inputs))]
            if counters["inductor"]["cudagraph_skips"] != skips:
                return "mode='reduce-overhead' skipped CUDA graphs (counters['inductor']['cudagraph_skips'])"
            why = torch_modules.compare(out, ref, eager, dtype, torch_modules.INDEX_CHECKS.get(name), module, inputs)
            if why:
                return f"mode='reduce-overhead': {why}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", default=",".join(torch_modules.MODULES))
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--reduce-overhead", action="store_true")
    ap.add_argument("--linear", default=None, choices=("inductor", "solder", "gated"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run (small f32, no CUDA graphs)")
    args = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}[args.dtype]
    options = {"solder.linear": args.linear} if args.linear else None
    failed = []
    names = args.modules.split(",")
    for name in names:
        try:
            why = check(name, dtype, args.small, args.reduce_overhead, options, args.device)
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        if why:
            failed.append(name)
            print(f"FAIL  {name} ({args.dtype}): {why}", flush=True)
        else:
            print(f"ok    {name} ({args.dtype})", flush=True)
    print(f"{len(names) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
