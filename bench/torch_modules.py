"""Real PyTorch modules, written the way their authors write them, for the torch.compile backend:
tests/gpu/torch.sh checks each against a float32 reference (and CUDA-graph capture + replay); this
file's main times them on the GPU: eager, torch.compile (default and max-autotune), backend="solder"
(linear layers on cuBLAS through Inductor, the default) and backend="solder" with
options={"solder.linear": "solder"} (everything Solder translates), every one CUDA-graph replayed, in
the same run; the first call's compile time of every variant (Solder: cold and warm caches); the
fraction of the FLOPs, bytes and ATen nodes that Solder's kernels took; and each variant's error
against the reference.

    python bench/torch_modules.py [--modules a,b] [--variants v,w] [--max-autotune-modules a,b]
                                  [--small] [--markdown FILE] [--json FILE] [--log FILE]
                                  [--time-budget SECONDS] [--deadline SECONDS] [--max-autotune-cost S]
                                  [--inductor-cache DIR] [--profile a,b]
                                  [--device cpu]

The variants run in phases, each over every module before the next: Solder's first (solder,
solder-gated on the modules with a gated pair of linear layers, solder-all), then eager and
torch.compile, then max-autotune (the slowest to compile: Inductor tunes every GEMM shape).
`--deadline SECONDS` fits the whole run in a device call: max-autotune runs on one module after another,
those where Solder is closest to (or behind) the best of eager and compile first, while a compile
(`--max-autotune-cost`, ~45 s on the H100) still fits; the others' cells say skipped, and why.
`--max-autotune-workers N` (with `--inductor-cache`) compiles max-autotune for the modules in N processes at
once first (the cold first call, in the table's last compile column), then times each module alone in
this process from the warm caches (its "max-autotune" compile column): the autotuning's benchmarks of
different modules then share the GPU, the timed calls never do.
`--warm-max-autotune` makes this a worker (compile and call each of --modules once with max-autotune,
one JSON line each); `--max-autotune-warmed FILES` reads such lines from workers started earlier with the
same --inductor-cache (bench/torch_modules_device.sh runs them beside the correctness tests).
`--time-budget` skips the optional variants (max-autotune, solder-gated, solder-all) of the modules
they reach after that many seconds; `--max-autotune-modules` runs max-autotune on those modules only
(the others' cells say so) and whatever the time budget, which then cuts only Solder's optional
variants. `--inductor-cache DIR` keeps Inductor's caches (compiled kernels, autotuning results) in
DIR, so that a later run given the same folder compiles warm (the compile table then says so).
`--profile a,b` adds, for those modules, each kernel's GPU µs per call in every compiled variant
(torch.profiler over 10 direct calls) to the log and the JSON. `--device cpu` is a dry run for a
machine without a GPU (wall-clock times, no CUDA graphs, f32 at `--small` shapes).

To add a module: write it below and add a line to MODULES (name -> factory(device, dtype, small)
returning (module, inputs)).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- nanoGPT: CausalSelfAttention (the manual path) --------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


# ---- Llama: attention with RoPE and GQA, SwiGLU MLP with RMSNorm -----------------------------------
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, theta=10000.0):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = n_heads, n_kv_heads, dim // n_heads
        self.q_proj = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(n_heads * self.hd, dim, bias=False)
        self.register_buffer("inv_freq", 1.0 / (theta ** (torch.arange(0, self.hd, 2).float() / self.hd)), persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        pos = torch.arange(T, device=x.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.n_heads // self.n_kv, dim=1)
        v = v.repeat_interleave(self.n_heads // self.n_kv, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, -1))


class LlamaMLP(nn.Module):
    def __init__(self, dim, hidden, eps=1e-6):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=eps)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


# ---- Differential attention (Flashlight Listing 4) -------------------------------------------------
class DiffAttention(nn.Module):
    def __init__(self, lam=0.8):
        super().__init__()
        self.lam = lam

    def forward(self, q1, k1, q2, k2, v):
        s = 1.0 / math.sqrt(q1.size(-1))
        a1 = F.softmax(q1 @ k1.transpose(-2, -1) * s, dim=-1)
        a2 = F.softmax(q2 @ k2.transpose(-2, -1) * s, dim=-1)
        return (a1 - self.lam * a2) @ v


# ---- OpenFold Evoformer: MSA row attention with pair bias and gate ---------------------------------
class MSARowAttentionWithPairBias(nn.Module):
    def __init__(self, c_m, c_z, c_hidden, no_heads):
        super().__init__()
        self.layer_norm_m, self.layer_norm_z = nn.LayerNorm(c_m), nn.LayerNorm(c_z)
        self.linear_z = nn.Linear(c_z, no_heads, bias=False)
        self.linear_q = nn.Linear(c_m, c_hidden * no_heads, bias=False)
        self.linear_k = nn.Linear(c_m, c_hidden * no_heads, bias=False)
        self.linear_v = nn.Linear(c_m, c_hidden * no_heads, bias=False)
        self.linear_g = nn.Linear(c_m, c_hidden * no_heads)
        self.linear_o = nn.Linear(c_hidden * no_heads, c_m)
        self.h, self.c = no_heads, c_hidden

    def forward(self, m, z):
        m = self.layer_norm_m(m)                                         # [*, S, R, c_m]
        z = self.linear_z(self.layer_norm_z(z)).permute(0, 3, 1, 2)      # [*, H, R, R]
        *b, S, R, _ = m.shape
        q = self.linear_q(m).view(*b, S, R, self.h, self.c).transpose(-2, -3) / math.sqrt(self.c)
        k = self.linear_k(m).view(*b, S, R, self.h, self.c).transpose(-2, -3)
        v = self.linear_v(m).view(*b, S, R, self.h, self.c).transpose(-2, -3)
        a = torch.softmax(q @ k.transpose(-1, -2) + z.unsqueeze(-4), dim=-1)
        o = (a @ v).transpose(-2, -3)                                    # [*, S, R, H, C]
        g = torch.sigmoid(self.linear_g(m)).view(*b, S, R, self.h, self.c)
        return self.linear_o((o * g).reshape(*b, S, R, self.h * self.c))


# ---- A MoE top-k router -----------------------------------------------------------------------------
class MoERouter(nn.Module):
    def __init__(self, dim, experts, k):
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)
        self.k = k

    def forward(self, x):
        probs = F.softmax(self.gate(x).float(), dim=-1)
        weights, experts = torch.topk(probs, self.k, dim=-1)
        return (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype), experts


def _r(*shape, device, dtype):
    return torch.randn(*shape, device=device, dtype=dtype)


# name -> factory(device, dtype, small) -> (module, inputs)
MODULES = {
    "nanogpt_attention": lambda d, t, small: (CausalSelfAttention(64 if small else 768, 4 if small else 12, 32 if small else 1024),
                                               (_r(2, 32, 64, device=d, dtype=t),) if small else (_r(8, 1024, 768, device=d, dtype=t),)),
    "llama_attention_rope_gqa": lambda d, t, small: (LlamaAttention(64 if small else 4096, 4 if small else 32, 2 if small else 8),
                                                      (_r(1, 16 if small else 2048, 64 if small else 4096, device=d, dtype=t),)),
    "llama_mlp_rmsnorm": lambda d, t, small: (LlamaMLP(64 if small else 4096, 128 if small else 11008),
                                               (_r(1, 16 if small else 512, 64 if small else 4096, device=d, dtype=t),)),
    "diff_attention": lambda d, t, small: (DiffAttention(),
                                           tuple(_r(1, 4 if small else 16, 32 if small else 2048, 16 if small else 64, device=d, dtype=t) for _ in range(5))),
    "evoformer_row_attention": lambda d, t, small: (MSARowAttentionWithPairBias(32 if small else 256, 16 if small else 128, 8 if small else 32, 4 if small else 8),
                                                     (_r(1, 4 if small else 128, 16 if small else 256, 32 if small else 256, device=d, dtype=t),
                                                      _r(1, 16 if small else 256, 16 if small else 256, 16 if small else 128, device=d, dtype=t))),
    "moe_router": lambda d, t, small: (MoERouter(64 if small else 2048, 16 if small else 128, 2 if small else 8),
                                       (_r(32 if small else 2048, 64 if small else 2048, device=d, dtype=t),)),
}


def make(name, device="cuda", dtype=torch.bfloat16, small=False):
    torch.manual_seed(0)
    module, inputs = MODULES[name](device, dtype, small)
    return module.to(device=device, dtype=dtype).eval(), inputs


def flat(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in flat(v)]
    return [x]


# ---- Reference and comparison ------------------------------------------------------------------------
def reference(module, inputs):
    """The module's outputs in float32: a copy of it (the same weights) upcast, on the inputs upcast."""
    import copy

    upcast = copy.deepcopy(module).float()
    with torch.no_grad():
        out = flat(upcast(*[x.float() if x.dtype.is_floating_point else x for x in inputs]))
    del upcast
    return out


def rel_error(got, want):
    got, want = got.double(), want.double()
    if not torch.isfinite(got).all():
        return float("inf")
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 2e-3}


def _router_indices(module, inputs, got, eager):
    """The router's expert indices may differ from eager's only between experts of equal probability
    (bf16 logits tie often): the probabilities they select must be the same."""
    with torch.no_grad():
        probs = F.softmax(module.gate(inputs[0]).float(), dim=-1)
    a, b = probs.gather(-1, got.long()), probs.gather(-1, eager.long())
    if not torch.equal(a, b):
        return f"{int((a != b).sum())} selected probabilities differ from eager's (not ties)"
    if (got.sort(dim=-1).values.diff(dim=-1) == 0).any():
        return "an expert is selected twice in a row"
    return None


# name -> check(module, inputs, got, eager) of integer outputs that may differ from eager's at ties
INDEX_CHECKS = {"moe_router": _router_indices}


def compare(got, ref, eager, dtype, index_check=None, module=None, inputs=None):
    """None when `got` matches: each float output within max(TOLERANCE[dtype], 2 × eager's error) of the
    float32 reference (relative L2 error, NaN never passes), integer outputs equal to eager's in at least
    99 % of the places, or passing `index_check` (top-k of near-equal bf16 scores orders ties in its own
    way). Else the reason."""
    if len(got) != len(ref):
        return f"{len(got)} outputs, expected {len(ref)}"
    worst = []
    for k, (g, r, e) in enumerate(zip(got, ref, eager)):
        if tuple(g.shape) != tuple(e.shape) or g.dtype != e.dtype:
            return f"output {k}: {g.dtype}{tuple(g.shape)}, expected {e.dtype}{tuple(e.shape)}"
        if e.dtype.is_floating_point:
            err, base = rel_error(g, r), rel_error(e, r)
            bound = max(TOLERANCE.get(dtype, 2e-2), 2 * base)
            worst.append(err)
            if not err <= bound:
                return f"output {k}: relative error {err:.2e} against the float32 reference, over {bound:.1e} (eager's: {base:.2e})"
        else:
            same = float((g == e).double().mean())
            if index_check is not None:
                why = index_check(module, inputs, g, e)
                if why:
                    return f"output {k}: {why}"
            elif same < 0.99:
                return f"output {k}: {100 * (1 - same):.1f} % of the integers differ from eager's"
    return None


def max_error(got, ref):
    errs = [rel_error(g, r) for g, r in zip(got, ref) if r.dtype.is_floating_point]
    return max(errs) if errs else 0.0


# ---- Timing -----------------------------------------------------------------------------------------
def graph_replay_us(fn, inputs, replays=50):
    """Median µs per call over CUDA-graph replays of fn(*inputs), and the outputs of the last replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*inputs)
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times), [t.clone() for t in flat(out)]


def wall_us(fn, inputs, calls=3):
    """On the CPU (dry run): median wall-clock µs of a call."""
    fn(*inputs)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*inputs)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times), flat(fn(*inputs))


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def coverage(explanations):
    """Fractions of FLOPs, bytes written and ATen nodes on Solder, over the graphs compiled."""
    totals = {}
    for e in explanations:
        for key, value in e.coverage().items():
            totals[key] = totals.get(key, 0) + value
    frac = lambda a, b: (totals.get(a, 0) / totals[b]) if totals.get(b) else 0.0
    return {"flops": frac("flops", "total_flops"), "bytes": frac("bytes", "total_bytes"),
            "nodes": frac("nodes", "total_nodes"), "gflop": totals.get("total_flops", 0) / 1e9}


VARIANTS = ("eager", "compile", "max-autotune", "solder", "solder-gated", "solder-all")
OPTIONAL = ("max-autotune", "solder-all", "solder-gated")
# The phases, in order: Solder's variants first (the numbers this benchmark is for), max-autotune last.
PHASES = (("solder", "solder-gated", "solder-all"), ("eager", "compile"), ("max-autotune",))
COMPILE_KW = {"compile": {}, "max-autotune": {"mode": "max-autotune-no-cudagraphs"},
              "solder": {"backend": "solder"},
              "solder-gated": {"backend": "solder", "options": {"solder.linear": "gated"}},
              "solder-all": {"backend": "solder", "options": {"solder.linear": "solder"}}}
GATED_MODULES = {"llama_mlp_rmsnorm"}  # modules with a gated pair of linear layers (solder-gated differs from solder)


class Case:
    """One module's state across the phases: the module, its inputs, the float32 reference, eager's
    outputs, and its row of results."""

    def __init__(self, name, args):
        device = args.device
        self.name, self.device = name, device
        self.dtype = torch.float32 if device == "cpu" else torch.bfloat16
        self.module, self.inputs = make(name, device=device, dtype=self.dtype, small=args.small)
        self.ref = reference(self.module, self.inputs)
        with torch.no_grad():
            self.eager_out = flat(self.module(*self.inputs))
        self.row = {"module": name, "shapes": [list(x.shape) for x in self.inputs], "dtype": str(self.dtype).replace("torch.", ""),
                    "error eager": max_error(self.eager_out, self.ref)}

    def timer(self, fn):
        return graph_replay_us(fn, self.inputs) if self.device == "cuda" else wall_us(fn, self.inputs)


def _compile_and_call(case, kw):
    start = time.perf_counter()
    fn = torch.compile(case.module, **kw)
    got = flat(fn(*case.inputs))
    _sync(case.device)
    return fn, got, time.perf_counter() - start


def run_variant(case, label, args, log):
    """Compiles and times one variant of one module into case.row (a failure is reported, not raised)."""
    import solder  # registers backend="solder"
    import solder._kernel
    import solder.torch_backend as tb
    import torch._dynamo

    name, row = case.name, case.row
    with torch.no_grad():
        try:
            if label == "eager":
                fn, got = case.module, case.eager_out
            else:
                kw = COMPILE_KW[label]
                torch._dynamo.reset()
                first = len(tb._last_explanations)
                if label == "solder":  # cold: an empty NVRTC disk cache and no kernels in the process
                    os.environ["SOLDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="solder-cold-")
                    solder._kernel._cache.clear()
                fn, got, row[f"compile s {label}"] = _compile_and_call(case, kw)
                if label.startswith("solder"):
                    found = tb._last_explanations[first:]
                    row[f"coverage {label}"] = coverage(found)
                    for k, e in enumerate(found):
                        print(f"== {name} {label} graph {k}\n{e.format()}", file=log)
                    log.flush()
                if label == "solder":  # warm: the disk caches filled, the in-process ones emptied
                    torch._dynamo.reset()
                    solder._kernel._cache.clear()
                    fn, got, row["compile s solder warm"] = _compile_and_call(case, kw)
            why = compare(got, case.ref, case.eager_out, case.dtype, INDEX_CHECKS.get(name), case.module, case.inputs)
            row[f"error {label}"] = max_error(got, case.ref)
            row[label], replayed = case.timer(fn)
            if why is None and case.device == "cuda":
                for r, g in zip(replayed, got):
                    if not torch.equal(r, g):
                        why = "the CUDA-graph replay differs from the direct call"
                        break
            row[f"check {label}"] = why or "ok"
        except Exception as e:  # report, keep going
            row[label] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            print(f"{name} {label}: {type(e).__name__}: {e}", file=log)
            log.flush()
            fn = None
        if fn is not None and name in args.profile and label != "eager" and case.device == "cuda":
            try:
                with torch.no_grad():
                    row[f"kernels {label}"] = kernel_times(fn, case.inputs)
                print(f"== {name} {label}: GPU µs per call by kernel (torch.profiler, 10 calls)", file=log)
                for k in row[f"kernels {label}"]:
                    print(f"   {k['us']:9.1f}  x{k['count']}  {k['name']}", file=log)
            except Exception as e:
                print(f"{name} {label}: profile failed: {type(e).__name__}: {e}", file=log)
            log.flush()
    print(f"  {name} {label}: {row.get(label)}", file=sys.stderr, flush=True)


def kernel_times(fn, inputs, calls=10):
    """Each CUDA kernel's GPU µs per call of fn (torch.profiler over `calls` direct calls), largest first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    found = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = getattr(e, "cuda_time_total", 0)
        if us > 0 and e.key and not e.key.startswith(("cudaGraph", "ProfilerStep")):
            found.append({"name": e.key[:160], "us": us / calls, "count": e.count // calls})
    return sorted(found, key=lambda k: -k["us"])[:25]


def warm_max_autotune(names, args):
    """A worker of --max-autotune-workers: compiles each module with max-autotune and calls it once,
    filling Inductor's caches (--inductor-cache, shared with the main process); prints one JSON line per
    module with the seconds of that first call."""
    import torch._dynamo

    for name in names:
        case_args = argparse.Namespace(device=args.device, small=args.small)
        module, inputs = make(name, device=case_args.device, dtype=torch.bfloat16 if args.device == "cuda" else torch.float32,
                              small=args.small)
        torch._dynamo.reset()
        try:
            with torch.no_grad():
                start = time.perf_counter()
                fn = torch.compile(module, **COMPILE_KW["max-autotune"])
                fn(*inputs)
                _sync(args.device)
                print(json.dumps({"module": name, "seconds": time.perf_counter() - start}), flush=True)
        except Exception as e:
            print(json.dumps({"module": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}), flush=True)


def _warm_in_workers(cases, args, log, started):
    """Runs max-autotune's first compile of every module in args.max_autotune_workers processes at once
    (each its share of the modules, in the order given), sharing --inductor-cache with this process,
    which then compiles from the warm caches and times each module alone. Returns {module: seconds of
    the cold first call in its worker}; a worker still running at the deadline is stopped."""
    names = [c.name for c in cases]
    shares = [names[k::args.max_autotune_workers] for k in range(args.max_autotune_workers)]
    procs = []
    for share in shares:
        if not share:
            continue
        cmd = [sys.executable, os.path.abspath(__file__), "--warm-max-autotune", "--modules", ",".join(share),
               "--device", args.device] + (["--small"] if args.small else [])
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True))
    cold = {}
    for p in procs:
        left = None
        if args.deadline:
            # leave the main pass about 10 s per module to compile from the caches, check and time
            left = max(1.0, args.deadline - (time.perf_counter() - started) - 10.0 * len(names))
        try:
            out, err = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, err = p.communicate()
            print(f"max-autotune worker stopped at the deadline: {' '.join(p.args[-4:])}", file=log)
        for line in out.splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "seconds" in r:
                cold[r["module"]] = r["seconds"]
            else:
                print(f"max-autotune worker: {r}", file=log)
        if err.strip():
            print("max-autotune worker stderr (tail):\n" + "\n".join(err.strip().splitlines()[-8:]), file=log)
    log.flush()
    print(f"  max-autotune workers: {len(cold)} of {len(names)} modules compiled, "
          f"{time.perf_counter() - started:.0f} s since the start", file=sys.stderr, flush=True)
    return cold


def _read_warmed(files, log):
    """{module: seconds} from the JSON lines of --warm-max-autotune workers started before this run."""
    cold = {}
    for path in files.split(","):
        try:
            with open(path) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if "seconds" in r:
                        cold[r["module"]] = r["seconds"]
                    elif "module" in r:
                        print(f"max-autotune worker: {r}", file=log)
        except OSError as e:
            print(f"max-autotune worker log {path}: {e}", file=log)
    return cold


def _max_autotune_order(cases):
    """The modules in the order max-autotune runs on them under --deadline: the largest solder ÷ best of
    eager and compile first (where the third peer can change the verdict), then those without a ratio."""
    def key(case):
        r = case.row
        others = [r[v] for v in ("eager", "compile") if isinstance(r.get(v), float)]
        return -(r["solder"] / min(others)) if others and isinstance(r.get("solder"), float) else 0.0
    return sorted(cases, key=key)


def run_all(names, args, log, started, on_row=None):
    """Every variant of every module, phase by phase (PHASES); returns the rows in module order."""
    cases = []
    for name in names:
        cases.append(Case(name, args))
    for phase in PHASES:
        for label in phase:
            if label not in args.variants:
                continue
            order = _max_autotune_order(cases) if label == "max-autotune" and args.deadline else cases
            cold = {}
            if label == "max-autotune" and args.max_autotune_warmed:
                cold = _read_warmed(args.max_autotune_warmed, log)
            elif label == "max-autotune" and args.max_autotune_workers > 0:
                todo = [c for c in order if not args.max_autotune_modules or c.name in args.max_autotune_modules]
                cold = _warm_in_workers(todo, args, log, started)
            for case in order:
                if label == "solder-gated" and case.name not in GATED_MODULES:
                    case.row[label] = "n/a (no gated pair of linear layers)"
                    continue
                if label == "max-autotune" and args.max_autotune_modules and case.name not in args.max_autotune_modules:
                    case.row[label] = "skipped (--max-autotune-modules)"
                    continue
                if label == "max-autotune" and case.name in cold:
                    case.row["compile s max-autotune cold"] = cold[case.name]
                if label == "max-autotune" and args.deadline:
                    left = args.deadline - (time.perf_counter() - started)
                    need = 8.0 if case.name in cold else args.max_autotune_cost
                    if left < need:
                        case.row[label] = (f"skipped (--deadline: {left:.0f} s left, its max-autotune needs "
                                           f"~{need:.0f} s{' from the warm cache' if case.name in cold else ' (cold)'})")
                        continue
                named = label == "max-autotune" and case.name in args.max_autotune_modules
                if label in OPTIONAL and not named and time.perf_counter() - started > args.time_budget:
                    case.row[label] = "skipped (time budget)"
                    continue
                run_variant(case, label, args, log)
                if on_row:
                    on_row([c.row for c in cases])
    return [c.row for c in cases]


def _num(x, fmt="{:.1f}"):
    return fmt.format(x) if isinstance(x, (int, float)) else "—"


def _cov(c):
    return "—" if not c else f"{100 * c['flops']:.0f} % / {100 * c['bytes']:.0f} % / {100 * c['nodes']:.0f} %"


def table(rows, device_name, small, warm_inductor=False):
    unit = "µs per call, CUDA-graph replay (median of 50)" if device_name != "cpu" else "µs per call, wall clock (CPU dry run)"
    cols = ["module", "eager", "compile", "max-autotune", "solder", "solder-gated", "solder-all", "solder ÷ best other",
            "solder-gated ÷ best", "solder-all ÷ best", "on Solder: FLOPs / bytes / nodes (solder; solder-all)", "checks"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    notes = []
    for r in rows:
        others = [r[v] for v in ("eager", "compile", "max-autotune") if isinstance(r.get(v), float)]
        best = min(others) if others else None
        ratio = lambda v: f"{r[v] / best:.2f}×" if best and isinstance(r.get(v), float) else "—"
        cov_text = _cov(r.get("coverage solder"))
        if r.get("coverage solder-all"):
            cov_text += f"; {_cov(r['coverage solder-all'])}"
        checks = [f"{v}: {r[f'check {v}']}" for v in VARIANTS if r.get(f"check {v}") not in (None, "ok")]
        cells = [r["module"]] + [_num(r.get(v)) if not isinstance(r.get(v), str) else
                                 ("skipped" if "skipped" in r[v] else "n/a" if r[v].startswith("n/a") else "failed")
                                 for v in ("eager", "compile", "max-autotune", "solder", "solder-gated", "solder-all")]
        cells += [ratio("solder"), ratio("solder-gated"), ratio("solder-all"), cov_text, "ok" if not checks else "see below"]
        lines.append("| " + " | ".join(cells) + " |")
        for v in VARIANTS:
            if isinstance(r.get(v), str) and not r[v].startswith("n/a"):
                notes.append(f"- {r['module']} {v}: {r[v]}")
        notes += [f"- {r['module']} {c}" for c in checks]
    # first-call compile seconds of every variant
    ccols = ["module", "solder cold", "solder warm", "solder-gated", "solder-all", "compile", "max-autotune",
             "max-autotune cold (worker)"]
    clines = ["| " + " | ".join(ccols) + " |", "|" + "---|" * len(ccols)]
    for r in rows:
        clines.append("| " + " | ".join([r["module"]] + [_num(r.get(f"compile s {k}")) for k in
                                                          ("solder", "solder warm", "solder-gated", "solder-all", "compile", "max-autotune",
                                                           "max-autotune cold")]) + " |")
    head = (f"GPU time in {unit}; {'bf16' if device_name != 'cpu' else 'f32'}"
            f"{', small shapes' if small else ''}. solder = backend=\"solder\" (linear layers on cuBLAS through Inductor, "
            "the default); solder-gated = options={\"solder.linear\": \"gated\"} (Solder takes gated pairs of linear "
            "layers, SwiGLU's gate and up, as one dual-B launch); solder-all = options={\"solder.linear\": \"solder\"}. On Solder: the fraction of "
            "the FLOPs, of the bytes an unfused run writes, and of the ATen nodes that Solder's kernels took.\n\n")
    ctext = ("\nFirst call's compile time, seconds (solder cold: empty Solder caches; warm: Solder's NVRTC disk cache "
             "and Inductor's caches filled; the others after the Solder variants, so Inductor's own kernels may be "
             f"warm{'; Inductor caches carried in from an earlier run (--inductor-cache)' if warm_inductor is True else ''}"
             f"{'; the cache holds the max-autotune workers compiles of this call, so compile may find some of its Triton kernels built' if warm_inductor == 'warmed' else ''}"
             f"{'; max-autotune cold (worker): its first call in a worker process, several at once' if warm_inductor == 'warmed' else ''}):\n\n")
    return head + "\n".join(lines) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "") + ctext + "\n".join(clines) + "\n"


def _commit():
    if os.environ.get("SOLDER_COMMIT"):
        return os.environ["SOLDER_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--max-autotune-modules", default="", help="run max-autotune on these modules only (default: all)")
    ap.add_argument("--small", action="store_true", help="small shapes (a quick check)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--log", help="write the partitions (solder.explain), kernel times and failures here")
    ap.add_argument("--time-budget", type=float, default=float("inf"))
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="seconds from the start by which the run must end: max-autotune (the last phase) runs on "
                         "one module after another, largest solder ÷ best of eager and compile first, while "
                         "--max-autotune-cost seconds remain; the rest say 'skipped (--deadline)'")
    ap.add_argument("--max-autotune-cost", type=float, default=45.0,
                    help="seconds one module's max-autotune takes (compile, checks, timing) for --deadline")
    ap.add_argument("--max-autotune-workers", type=int, default=0,
                    help="compile max-autotune first in this many processes at once (needs --inductor-cache), "
                         "then time each module alone from the warm caches")
    ap.add_argument("--warm-max-autotune", action="store_true",
                    help="only compile max-autotune for --modules and call each once (filling --inductor-cache); "
                         "prints one JSON line per module with the seconds it took")
    ap.add_argument("--max-autotune-warmed", default="",
                    help="files of --warm-max-autotune lines from workers run before this (same --inductor-cache): "
                         "those modules' max-autotune compiles warm here, their cold seconds come from the files")
    ap.add_argument("--inductor-cache", help="keep Inductor's caches in this folder (TORCHINDUCTOR_CACHE_DIR)")
    ap.add_argument("--profile", default="", help="modules whose kernels are timed one by one (torch.profiler)")
    args = ap.parse_args()
    args.variants = args.variants.split(",")
    args.profile = [m for m in args.profile.split(",") if m]
    args.max_autotune_modules = [m for m in args.max_autotune_modules.split(",") if m]
    unknown = [m for m in args.modules.split(",") + args.profile + args.max_autotune_modules if m not in MODULES] + \
        [v for v in args.variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown module or variant: {', '.join(unknown)} (modules: {', '.join(MODULES)}; variants: {', '.join(VARIANTS)})")
    warm_inductor = False
    if args.inductor_cache:
        os.makedirs(args.inductor_cache, exist_ok=True)
        warm_inductor = any(os.scandir(args.inductor_cache))
        if warm_inductor and args.max_autotune_warmed:
            warm_inductor = "warmed"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath(args.inductor_cache)
        os.environ["TRITON_CACHE_DIR"] = os.path.join(os.path.abspath(args.inductor_cache), "triton")
    if args.device == "cpu":
        args.small = True
    if args.warm_max_autotune:
        warm_max_autotune(args.modules.split(","), args)
        return
    if (args.max_autotune_workers > 0 or args.max_autotune_warmed) and not args.inductor_cache:
        ap.error("--max-autotune-workers and --max-autotune-warmed need --inductor-cache (the workers fill it, this process reads it)")
    started = time.perf_counter()
    log = open(args.log, "w") if args.log else open(os.devnull, "w")

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"

    def write_markdown(rows):
        with open(args.markdown, "w") as f:
            f.write(f"# torch modules on {device_name}\n\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                    f"commit {_commit()}, torch {torch.__version__}, `python bench/torch_modules.py`"
                    f"{' --small' if args.small else ''}; {time.perf_counter() - started:.0f} s in all.\n\n"
                    + table(rows, device_name, args.small, warm_inductor))

    def save(rows):  # after every variant, so that a run stopped at its deadline keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1, default=str)
        if args.markdown:
            write_markdown(rows)

    rows = run_all(args.modules.split(","), args, log, started, on_row=save)
    for r in rows:
        print(json.dumps(r, default=str), flush=True)
    save(rows)
    print(table(rows, device_name, args.small, warm_inductor))


if __name__ == "__main__":
    main()
