"""Real PyTorch modules, written the way their authors write them, for the torch.compile backend:
tests/gpu/torch.sh checks each against eager (and CUDA-graph capture + replay); this file's main times
them on the GPU: eager, torch.compile (default and max-autotune) and backend="solder", every one
CUDA-graph replayed, in the same run; the first call's compile time (cold and warm cache); and the
fraction of each module's ATen nodes that Solder's kernels took.

    python bench/torch_modules.py [--modules a,b] [--markdown bench/results/h100/torch_modules.md]

To add a module: write it below and add a line to MODULES (name -> factory(device, dtype) returning
(module, inputs)). Modules that need ops the .sol language lacks (RoPE's sin/cos before the language
branch lands) still run: those nodes fall back to Inductor and `solder.explain` says so.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
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


# ---- Timing -----------------------------------------------------------------------------------------
def graph_replay_us(fn, inputs, replays=50):
    """Median µs per call over CUDA-graph replays of fn(*inputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*inputs)
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


def coverage(module, inputs):
    import solder

    with open(os.devnull, "w") as null:
        found = solder.explain(module, *inputs, file=null)
    on, total = 0, 0
    for e in found:
        on += sum(len(p["nodes"]) for p in e.partitions if not p.get("error"))
        total += sum(len(p["nodes"]) for p in e.partitions if not p.get("error")) + len(e.fallback)
    return on / total if total else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--small", action="store_true", help="small shapes (a quick check)")
    ap.add_argument("--markdown", help="write the table here")
    args = ap.parse_args()
    import solder  # registers backend="solder"
    import solder.torch_backend
    import torch._dynamo

    rows = []
    for name in args.modules.split(","):
        module, inputs = make(name, small=args.small)
        row = {"module": name}
        with torch.no_grad():
            row["eager"] = graph_replay_us(module, inputs)
            for label, kw in (("compile", {}), ("max-autotune", {"mode": "max-autotune-no-cudagraphs"}), ("solder", {"backend": "solder"})):
                torch._dynamo.reset()
                if label == "solder":  # cold: an empty NVRTC cache and no in-process kernels
                    os.environ["SOLDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="solder-cold-")
                    solder._kernel._cache.clear()
                start = time.perf_counter()
                try:
                    fn = torch.compile(module, **kw)
                    fn(*inputs)
                    torch.cuda.synchronize()
                    if label == "solder":
                        row["compile cold s"] = time.perf_counter() - start
                        torch._dynamo.reset()
                        start = time.perf_counter()
                        fn = torch.compile(module, **kw)
                        fn(*inputs)
                        torch.cuda.synchronize()
                        row["compile warm s"] = time.perf_counter() - start
                    row[label] = graph_replay_us(fn, inputs)
                except Exception as e:  # report, keep going
                    row[label] = float("nan")
                    print(f"{name} {label}: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
            row["coverage"] = coverage(module, inputs)
        rows.append(row)
        print(row, flush=True)
    cols = ["module", "eager", "compile", "max-autotune", "solder", "compile cold s", "compile warm s", "coverage"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r["module"]] + [f"{r.get(c, float('nan')):.1f}" if c not in ("coverage",) else f"{100 * r.get(c, 0):.0f} %" for c in cols[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    table = "GPU µs per call (CUDA-graph replay, median), bf16; compile seconds of the first call; coverage = ATen nodes on Solder\n\n" + "\n".join(lines) + "\n"
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"# torch modules ({torch.cuda.get_device_name()}, torch {torch.__version__})\n\n" + table)


if __name__ == "__main__":
    main()
