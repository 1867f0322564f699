#!/usr/bin/env python3
"""Benchmark suites of Solder, as data, shared by the peer script and the report.

Each case names a Solder example (examples/*.sol), the `--dim NAME=VALUE` overrides that give the
paper shape, the FLOP count by the usual convention and the floor bytes (every input read once and
every output written once, sizes and dtypes taken from the .sol itself).

    python3 bench/suites.py --list [--suite S]          table of cases (id, dims, GFLOP, floor MB)
    python3 bench/suites.py --solder-commands [--suite S] [--quick] [--solder build/solder] [--out F]
                                                        the `solder bench` command lines of a suite
    python3 bench/suites.py --verify-commands [--cases RE] [--solder build/solder]
                                                        `solder run --backend cuda` of each case at its size
    python3 bench/suites.py --check                     parse every example, print inputs/outputs

Conventions (also in bench/README.md):
  attention   4*B*H*S^2*D (QK^T and PV), per attention; causal counts half (S^2/2); sliding window
              and prefix-LM count the visible (i, j) pairs exactly; document mask counts dense
              (its density depends on the random document ids).
  GEMM        2*M*N*K per GEMM.
  reductions  0 (the floor is the bytes).
  decode      2*HID*3*H*D (QKV) + 4*H*D*(KV+1) (attention) + 2*H*D*HID (output projection), per batch row.
  contractions  2*M*N*K per matrix product: linear_relu_backward 2 * 2*N*CI*CO (dx and dw); nerf_mlp
              the sum over its eleven layers; conv_chain (implicit GEMM) 2*N*HH*WW*(OC1*IC*KS^2 + OC2*OC1).

This module needs only the Python standard library.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1, "i32": 4, "bool": 1}

# Ceilings measured on the H100 of shared/reference/h100-peers-2026-11-22.md; used by the report only
# when a run did not measure its own (peers.py measures them at the start of every GPU run).
REFERENCE_CEILINGS = {"copy_TBps": 3.00, "bf16_mm_TFLOPs": 710.0, "fp8_mm_TFLOPs": 1420.0}
L2_BYTES = 50 * 1024 * 1024  # H100: 50 MB

SUITES = ("attention", "gemm_chains", "reductions", "decode", "contractions", "attention_hd256", "attention_fp8", "f32")


# --------------------------------------------------------------------------------------------------
# A small reader of the .sol format: enough to know dims, inputs (shape, dtype, distribution) and
# outputs (shape, dtype). The C++ parser is the authority; this one only reads the examples.
# --------------------------------------------------------------------------------------------------

@dataclass
class Tensor:
    name: str
    shape: tuple  # of ints, once the dims are resolved
    dtype: str
    dist: tuple | None = None  # ("normal", (0.0, 0.02)) or None for the dtype's default

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass
class SolProgram:
    path: str
    name: str
    dim_exprs: list          # [(name, expr text)] in order
    small: dict              # name -> expr text
    inputs_raw: list         # [(name, [dim exprs], dtype, dist)]
    defs_raw: list           # [(targets, rhs)] with targets [(is_out, name, [(var, extent expr|None)], dtype)]

    def dims(self, overrides: dict | None = None, small: bool = False) -> dict:
        """Resolve every dim: overrides (and the small set) replace a dim's value; derived dims
        are recomputed from the values before them."""
        values: dict = {}
        ov = dict(overrides or {})
        for name, expr in self.dim_exprs:
            if name in ov:
                values[name] = int(ov.pop(name))
            elif small and name in self.small:
                values[name] = _eval_int(self.small[name], values)
            else:
                values[name] = _eval_int(expr, values)
        if ov:
            raise ValueError(f"{self.path}: unknown dim(s) {sorted(ov)}; the program has {[n for n, _ in self.dim_exprs]}")
        return values

    def tensors(self, dims: dict):
        """(inputs, outputs) as lists of Tensor with resolved shapes."""
        shapes: dict = {}
        dtypes: dict = {}
        inputs = []
        for name, dexprs, dtype, dist in self.inputs_raw:
            shape = tuple(_eval_int(e, dims) for e in dexprs)
            shapes[name], dtypes[name] = shape, dtype
            inputs.append(Tensor(name, shape, dtype, dist))
        outputs = []
        for targets, rhs in self.defs_raw:
            extents: dict = {}
            for _, _, decls, _ in targets:
                for var, ext in decls:
                    if ext is not None:
                        extents[var] = _eval_int(ext, dims)
            red = re.match(r"\s*(sum|max|min|prod|argmax|argmin)\s*\(([^()]*)\)", rhs)
            if red:
                for decl in red.group(2).split(","):
                    if ":" in decl:
                        var, ext = decl.split(":", 1)
                        extents.setdefault(var.strip(), _eval_int(ext, dims))
            for tname, args in _loads(rhs):
                if tname not in shapes:
                    continue
                for pos, arg in enumerate(args):
                    if re.fullmatch(r"[A-Za-z_]\w*", arg) and arg not in dims and pos < len(shapes[tname]):
                        extents.setdefault(arg, shapes[tname][pos])
            topk = re.match(r"\s*topk\s*\(([^,]+),", rhs)
            for is_out, tname, decls, dtype in targets:
                shape = []
                for var, _ in decls:
                    if var not in extents and topk:
                        extents[var] = _eval_int(topk.group(1), dims)
                    if var not in extents:
                        raise ValueError(f"{self.path}: cannot infer the extent of '{var}' in '{tname}'")
                    shape.append(extents[var])
                if topk and tname != targets[0][1]:
                    dtype = dtype or "i32"
                dtype = dtype or "f32"
                shapes[tname], dtypes[tname] = tuple(shape), dtype
                if is_out:
                    outputs.append(Tensor(tname, tuple(shape), dtype))
        return inputs, outputs


def _eval_int(expr: str, env: dict) -> int:
    expr = expr.strip()
    if not re.fullmatch(r"[\w\s+\-*/%()]*", expr):
        raise ValueError(f"not a dim expression: {expr!r}")
    for name in re.findall(r"[A-Za-z_]\w*", expr):
        if name not in env:
            raise ValueError(f"unknown dim '{name}' in {expr!r}")
    return int(eval(expr, {"__builtins__": {}}, dict(env)))  # noqa: S307 (dims only, checked above)


def _split_top(text: str, sep: str = ","):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _loads(text: str):
    """Every NAME[args] in text, args split at top-level commas."""
    out = []
    for m in re.finditer(r"([A-Za-z_]\w*)\s*\[", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            i += 1
        out.append((m.group(1), _split_top(text[m.end():i - 1])))
    return out


def _logical_lines(text: str):
    lines, cur = [], ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip() and not cur:
            continue
        cur = (cur + " " + line.strip()).strip() if cur else line.strip()
        if not cur:
            continue
        opens = cur.count("(") + cur.count("[") - cur.count(")") - cur.count("]")
        if opens > 0 or re.search(r"(\(|\[|,|\+|-|\*|/|%|=|~|:|&&|\|\||<|>)$", cur):
            continue
        lines.append(cur)
        cur = ""
    if cur:
        lines.append(cur)
    return lines


def _top_assign(line: str) -> int:
    depth = 0
    for i, ch in enumerate(line):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "=" and depth == 0:
            prev = line[i - 1] if i else ""
            nxt = line[i + 1] if i + 1 < len(line) else ""
            if prev not in "<>=!" and nxt != "=":
                return i
    return -1


_SOL_CACHE: dict = {}


def read_sol(path: str) -> SolProgram:
    full = path if os.path.isabs(path) else os.path.join(REPO, path)
    if full in _SOL_CACHE:
        return _SOL_CACHE[full]
    with open(full) as f:
        text = f.read()
    name, dim_exprs, small, inputs, defs = None, [], {}, [], []
    for line in _logical_lines(text):
        word = line.split(None, 1)[0]
        rest = line[len(word):].strip()
        if word == "program":
            name = rest
        elif word in ("dim", "small"):
            for binding in _split_top(rest):
                n, e = binding.split("=", 1)
                if word == "dim":
                    dim_exprs.append((n.strip(), e.strip()))
                else:
                    small[n.strip()] = e.strip()
        elif word == "in":
            m = re.fullmatch(r"([A-Za-z_]\w*)\s*(?:\[(.*)\])?\s*:\s*(\w+)\s*(?:~\s*(\w+)\s*\((.*)\))?", rest)
            if not m:
                raise ValueError(f"{path}: cannot read input line: {line}")
            dims = _split_top(m.group(2)) if m.group(2) else []
            dist = (m.group(4), tuple(float(x) for x in _split_top(m.group(5)))) if m.group(4) else None
            inputs.append((m.group(1), dims, m.group(3), dist))
        else:
            eq = _top_assign(line)
            if eq < 0:
                raise ValueError(f"{path}: cannot read statement: {line}")
            targets = []
            for t in _split_top(line[:eq]):
                m = re.fullmatch(r"(out\s+)?([A-Za-z_]\w*)\s*\[(.*)\]\s*(?::\s*(\w+))?", t)
                if not m:
                    raise ValueError(f"{path}: cannot read target: {t}")
                decls = []
                for d in _split_top(m.group(3)):
                    var, _, ext = d.partition(":")
                    decls.append((var.strip(), ext.strip() or None))
                targets.append((bool(m.group(1)), m.group(2), decls, m.group(4)))
            defs.append((targets, line[eq + 1:]))
    prog = SolProgram(full, name, dim_exprs, small, inputs, defs)
    _SOL_CACHE[full] = prog
    return prog


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------

@dataclass
class Case:
    id: str
    suite: str
    workload: str          # the example's stem; peers.py keys its implementations on it
    overrides: dict        # --dim NAME=VALUE (relative to the .sol defaults)
    tag: str = ""          # paper row id (S1, R7, ...), or a short shape description
    quick: bool = False    # the one shape of this workload that --quick runs
    note: str = ""
    sol: str = ""          # the program's path when it is not examples/<workload>.sol

    @property
    def example(self) -> str:
        return self.sol or f"examples/{self.workload}.sol"

    @property
    def program(self) -> SolProgram:
        return read_sol(self.example)

    def dims(self, small: bool = False) -> dict:
        return self.program.dims({} if small else self.overrides, small=small)

    def tensors(self, small: bool = False):
        return self.program.tensors(self.dims(small))

    def floor_bytes(self, small: bool = False) -> int:
        ins, outs = self.tensors(small)
        return sum(t.nbytes for t in ins) + sum(t.nbytes for t in outs)

    def flops(self, small: bool = False) -> float:
        return float(FLOPS[self.workload](self.dims(small)))

    def mm_dtype(self) -> str:
        """Which tensor-core rate bounds this case ('bf16' covers f16 too; 'fp8'; None: no GEMM)."""
        return {"quant_gemm": "fp8", "attention_fp8": "fp8", "variance": None, "inertia": None,
                **{wl: "f32" for wl in F32_WORKLOADS}}.get(self.workload, "bf16")

    def solder_args(self, small: bool = False) -> list:
        if small:
            return [self.example, "--small"]
        args = [self.example]
        for k, v in self.overrides.items():
            args += ["--dim", f"{k}={v}"]
        return args


def _visible_pairs_sliding(S, W):
    # row i sees j in [max(0, i - W), i]
    return sum(min(i, W) + 1 for i in range(S))


def _visible_pairs_prefix(S, P):
    # row i sees j < P, and j <= i
    return sum(max(P, i + 1) if i >= P else min(P, S) for i in range(S))


def _attn(d, heads="H", pairs=None):
    S = d.get("S")
    p = pairs if pairs is not None else S * S
    return 4 * d["B"] * d[heads] * p * d["D"]


# All-f32 matrix products (issue 15 item 2: 3xTF32), programs under bench/tf32/: f32mm's plain operands, and
# computed ones the split evaluates (x · s[k], silu(x + bias) as an intermediate, RMSNorm's x · g).
F32_WORKLOADS = ("f32mm", "f32_scaled", "f32_silu", "f32_rmsnorm", "f32_tanh_t")

FLOPS = {
    **{wl: (lambda d: 2 * d["M"] * d["N"] * d["K"]) for wl in F32_WORKLOADS},
    "vanilla": lambda d: _attn(d),
    "attention_fp8": lambda d: _attn(d),
    "alibi": lambda d: _attn(d),
    "softcap": lambda d: _attn(d),
    "document_mask": lambda d: _attn(d),
    "gqa": lambda d: _attn(d),
    "causal": lambda d: _attn(d, pairs=d["S"] * d["S"] / 2),
    "sliding_window": lambda d: _attn(d, pairs=_visible_pairs_sliding(d["S"], d["WIN"])),
    "prefix_lm": lambda d: _attn(d, pairs=_visible_pairs_prefix(d["S"], d["PRE"])),
    "diff_attn": lambda d: 2 * _attn(d),  # two attentions of H heads each
    "evoformer": lambda d: 4 * d["B"] * d["S1"] * d["H"] * d["S2"] * d["S2"] * d["D"],
    "ffn": lambda d: 2 * d["M"] * d["N"] * d["K"] + 2 * d["M"] * d["N"] * d["L"],
    "gated_ffn": lambda d: 2 * 2 * d["M"] * d["N"] * d["K"] + 2 * d["M"] * d["N"] * d["L"],
    "moe_routing": lambda d: 2 * d["T"] * d["HID"] * d["E"],
    "quant_gemm": lambda d: 2 * d["M"] * d["N"] * d["K"],
    "rmsnorm_gemm": lambda d: 2 * d["T"] * d["HID"] * d["N"],
    "variance": lambda d: 0,
    "inertia": lambda d: 0,
    "linear_relu_backward": lambda d: 2 * 2 * d["N"] * d["CI"] * d["CO"],
    "nerf_mlp": lambda d: 2 * d["N"] * (d["IN"] * d["H"] + 6 * d["H"] * d["H"] + (d["IN"] + d["H"]) * d["H"] + d["H"]
                                        + (d["H"] + d["DIN"]) * (d["H"] // 2) + (d["H"] // 2) * 3),
    "conv_chain": lambda d: 2 * d["N"] * d["HH"] * d["WW"] * (d["OC1"] * d["IC"] * d["KS"] ** 2 + d["OC2"] * d["OC1"]),
    "llama_decode": lambda d: d["B"] * (2 * d["HID"] * 3 * d["H"] * d["D"] + 4 * d["H"] * d["D"] * (d["KV"] + 1)
                                        + 2 * d["H"] * d["D"] * d["HID"]),
}

ATTN_SEQS = (1024, 4096, 16384)
ATTN_TOKENS = 16384

FLASHFUSER = [  # id, M, N, K, L (workloads.md, FlashFuser Tables V-VII)
    ("S1", 128, 8192, 3072, 3072), ("S2", 128, 5632, 2048, 2048), ("S3", 128, 11008, 4096, 4096),
    ("S4", 128, 8192, 2048, 2048), ("S5", 128, 11008, 2048, 2048), ("S6", 128, 8960, 1536, 1536),
    ("S7", 128, 9728, 2560, 2560), ("S8", 128, 3072, 1024, 1024),
    ("G1", 128, 512, 32, 256), ("G2", 128, 256, 512, 64), ("G3", 128, 512, 416, 256),
    ("G4", 128, 3072, 768, 768), ("G5", 128, 16384, 4096, 4096), ("G6", 128, 4096, 1024, 1024),
    ("G7", 128, 768, 768, 768), ("G8", 128, 8192, 2048, 2048), ("G9", 128, 2048, 512, 512),
    ("G10", 128, 1536, 384, 384),
]
MOE = [("R1", 2048, 768, 128, 1), ("R2", 2048, 1024, 128, 1), ("R3", 2048, 4096, 128, 1),
       ("R4", 2048, 2560, 64, 6), ("R5", 2048, 8192, 64, 8), ("R6", 2048, 2048, 64, 6),
       ("R7", 2048, 2048, 128, 8), ("R8", 2048, 4096, 128, 8)]
QUANT = [("Q1", 4096, 1536, 2560), ("Q2", 4096, 2560, 1536), ("Q3", 4096, 3584, 8192),
         ("Q4", 4096, 8192, 3584), ("Q5", 4096, 7168, 2048), ("Q6", 4096, 2048, 7168),
         ("Q7", 4096, 2048, 768), ("Q8", 4096, 768, 2048), ("Q9", 4096, 4096, 1536),
         ("Q10", 4096, 1536, 4096)]
RMSNORM = [("L1", 2048, 4096, 6144), ("L2", 4096, 4096, 14336)]  # Llama-3-8B: QKV, and the MLP's up projection
ROWS = [(1, 8192), (1, 32768), (128, 8192), (128, 32768), (512, 8192), (512, 32768),
        (1024, 8192), (1024, 32768)]  # V1..V8 and I1..I8: [bs, l] / [bs, n]


def _attention_cases():
    cases = []
    variants = [  # workload, head dims, extra note
        ("vanilla", (64, 128)), ("causal", (64, 128)), ("alibi", (64,)), ("softcap", (64,)),
        ("sliding_window", (64,)), ("prefix_lm", (64,)), ("document_mask", (64,)), ("gqa", (64,)),
        ("diff_attn", (64, 128)),
    ]
    for wl, hds in variants:
        for D in hds:
            for S in ATTN_SEQS:
                B = ATTN_TOKENS // S
                ov = {"B": B, "S": S, "D": D}
                if wl == "diff_attn":
                    ov["H"] = 8   # 2 x 8 = 16 query/key heads
                else:
                    ov["H"] = 16
                cases.append(Case(f"{wl}-d{D}-s{S}", "attention", wl, ov, tag=f"B{B} S{S} D{D}",
                                  quick=(D == 64 and S == 4096)))
    for B, D in ((1, 64), (8, 64), (32, 64), (8, 128)):
        cases.append(Case(f"evoformer-b{B}-d{D}", "attention", "evoformer",
                          {"B": B, "S1": 256, "S2": 256, "H": 4, "D": D}, tag=f"B{B} 256x256 H4 D{D}",
                          quick=(B == 8 and D == 64)))
    return cases


def _attention_hd256_cases():
    """Head dim 256 (vanilla and causal at S 4k and 16k, 16k tokens, 16 heads) against cuDNN: a suite of
    its own, outside the `attention` suite whose 40 cells make the head table of
    results/h100/attention.md (bench/attention/status.py reads only that suite)."""
    cases = []
    for wl in ("vanilla", "causal"):
        for S in (4096, 16384):
            B = ATTN_TOKENS // S
            cases.append(Case(f"{wl}-d256-s{S}", "attention_hd256", wl, {"B": B, "S": S, "D": 256, "H": 16},
                              tag=f"B{B} S{S} D256", quick=(S == 4096 and wl == "vanilla")))
    return cases


def _attention_fp8_cases():
    """attention_fp8 (e4m3 q, k, v, P rounded to e4m3, bf16 o; issue 17 item 1) at the attention suite's
    shapes, hd64 and hd128, against cuDNN's bf16 kernel on the dequantized inputs: a suite of its own, outside
    the 40 cells of the head table, like attention_hd256."""
    cases = []
    for D in (64, 128):
        for S in ATTN_SEQS:
            B = ATTN_TOKENS // S
            cases.append(Case(f"attention_fp8-d{D}-s{S}", "attention_fp8", "attention_fp8",
                              {"B": B, "S": S, "D": D, "H": 16}, tag=f"B{B} S{S} D{D}",
                              quick=(D == 64 and S == 4096)))
    return cases


def _gemm_cases():
    cases = []
    for wl in ("ffn", "gated_ffn"):
        for tag, M, N, K, L in FLASHFUSER:
            cases.append(Case(f"{wl}-{tag}", "gemm_chains", wl, {"M": M, "N": N, "K": K, "L": L},
                              tag=tag, quick=(tag == "S1")))
    return cases


def _reduction_cases():
    cases = []
    for tag, T, HID, E, K in MOE:
        cases.append(Case(f"moe_routing-{tag}", "reductions", "moe_routing",
                          {"T": T, "HID": HID, "E": E, "K": K}, tag=tag, quick=(tag == "R7")))
    for i, (bs, n) in enumerate(ROWS, 1):
        cases.append(Case(f"variance-V{i}", "reductions", "variance", {"BS": bs, "L": n},
                          tag=f"V{i}", quick=(i == 8)))
    for tag, M, N, K in QUANT:
        cases.append(Case(f"quant_gemm-{tag}", "reductions", "quant_gemm", {"M": M, "N": N, "K": K},
                          tag=tag, quick=(tag == "Q5")))
    for tag, T, HID, N in RMSNORM:
        cases.append(Case(f"rmsnorm_gemm-{tag}", "reductions", "rmsnorm_gemm", {"T": T, "HID": HID, "N": N},
                          tag=tag, quick=(tag == "L1")))
    for i, (bs, n) in enumerate(ROWS, 1):
        cases.append(Case(f"inertia-I{i}", "reductions", "inertia", {"BS": bs, "N": n},
                          tag=f"I{i}", quick=(i == 8)))
    return cases


def _decode_cases():
    return [Case(f"llama_decode-kv{kv}", "decode", "llama_decode", {"B": 1, "KV": kv}, tag=f"KV {kv}",
                 quick=(kv == 1024)) for kv in (1024, 4096, 16384)]


# FlashFuser's convolution chains (workloads.md): id, IC, H (= W), OC1, OC2, k1 (k2 is 1), batch 1.
CONV = [("C1", 64, 56, 256, 64, 1), ("C5", 64, 56, 64, 256, 3), ("C6", 128, 28, 128, 512, 3),
        ("C7", 256, 14, 256, 1024, 3)]


def _contraction_cases():
    """Matrix products that are not attention or a plain GEMM chain (issue 15): the ReLU layer's
    backward pass (two gradient GEMMs, one of them a reduction over the 65536 rows), NeRF's MLP
    (eleven layers, two of them over a concatenated K), and convolution chains as implicit GEMMs."""
    cases = [Case("linear_relu_backward-nerf", "contractions", "linear_relu_backward", {}, tag="N 65536, 256x256",
                  quick=True),
             Case("linear_relu_backward-wide", "contractions", "linear_relu_backward",
                  {"N": 16384, "CI": 1024, "CO": 1024}, tag="N 16384, 1024x1024"),
             Case("nerf_mlp-65536", "contractions", "nerf_mlp", {}, tag="1024 rays x 64 samples", quick=True)]
    for tag, IC, HW, OC1, OC2, KS in CONV:
        cases.append(Case(f"conv_chain-{tag}", "contractions", "conv_chain",
                          {"IC": IC, "HH": HW, "WW": HW, "OC1": OC1, "OC2": OC2, "KS": KS}, tag=tag, quick=(tag == "C5")))
    return cases


def _f32_cases():
    """All-f32 products at 4096³ against eager and torch.compile in f32 (allow_tf32 = False: cuBLAS SGEMM)."""
    return [Case(f"{wl}-4096", "f32", wl, {}, tag="4096^3", quick=(wl == "f32mm"), sol=f"bench/tf32/{wl}.sol")
            for wl in F32_WORKLOADS]


ALL_CASES = (_attention_cases() + _gemm_cases() + _reduction_cases() + _decode_cases() + _contraction_cases()
             + _attention_hd256_cases() + _attention_fp8_cases() + _f32_cases())
CASES_BY_ID = {c.id: c for c in ALL_CASES}
assert len(CASES_BY_ID) == len(ALL_CASES), "duplicate case ids"


def cases(suite: str = "all", quick: bool = False, pattern: str | None = None):
    """Cases of a suite ('all' for every suite); quick: one shape per workload; pattern: a regular
    expression the case id must match (re.search)."""
    if suite != "all" and suite not in SUITES:
        raise ValueError(f"unknown suite '{suite}'; expected one of {', '.join(SUITES)} or all")
    out = [c for c in ALL_CASES if suite in ("all", c.suite)]
    if quick:
        out = [c for c in out if c.quick]
    if pattern:
        rx = re.compile(pattern)
        out = [c for c in out if rx.search(c.id)]
    return out


def floor_us(case: Case, ceilings: dict | None = None, small: bool = False) -> float:
    """max(bytes / copy bandwidth, FLOPs / tensor rate), in µs."""
    c = dict(REFERENCE_CEILINGS)
    c.update({k: v for k, v in (ceilings or {}).items() if v})
    t_bytes = case.floor_bytes(small) / (c["copy_TBps"] * 1e12)
    mm = case.mm_dtype()
    # f32: 3xTF32's three tf32 products at half the bf16 rate
    rate = c["fp8_mm_TFLOPs"] if mm == "fp8" else c["bf16_mm_TFLOPs"] / 6 if mm == "f32" else c["bf16_mm_TFLOPs"]
    t_flops = case.flops(small) / (rate * 1e12) if mm else 0.0
    return max(t_bytes, t_flops) * 1e6


def _recorded(case: Case, path: str) -> bool:
    """Whether `solder bench --json` output in `path` already holds this case (same file and dims)."""
    if not os.path.exists(path):
        return False
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            dims = r.get("dims", {})
            if r.get("file") == case.example and all(dims.get(k) == v for k, v in case.overrides.items()):
                return True
    return False


# --------------------------------------------------------------------------------------------------

def _main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="all", choices=SUITES + ("all",))
    ap.add_argument("--quick", action="store_true", help="one shape per workload")
    ap.add_argument("--cases", default=None, help="regular expression on case ids")
    ap.add_argument("--list", action="store_true", help="print the cases as a table")
    ap.add_argument("--check", action="store_true", help="read every example; print inputs and outputs")
    ap.add_argument("--solder-commands", action="store_true", help="print `solder bench` command lines")
    ap.add_argument("--verify-commands", action="store_true",
                    help="print `solder run --backend cuda` command lines (each case at its size, checked against "
                         "the float64 reference; exit status 0 when verified)")
    ap.add_argument("--solder", default="build/solder",
                    help="path of the solder binary (for --solder-commands and --verify-commands)")
    ap.add_argument("--out", default="bench/results/solder.jsonl", help="JSON lines file for --solder-commands")
    ap.add_argument("--compile-only", action="store_true",
                    help="with --solder-commands: `solder bench --compile-only` lines (fill the compile cache; "
                         "no GPU; safe to run in parallel)")
    ap.add_argument("--timeout", type=int, default=None,
                    help="with --solder-commands or --verify-commands: prefix each line with `timeout SECONDS`")
    ap.add_argument("--resume", action="store_true",
                    help="with --solder-commands: leave out cases already recorded in --out")
    a = ap.parse_args(argv)
    sel = cases(a.suite, a.quick, a.cases)
    if a.solder_commands and a.resume and not a.compile_only:
        sel = [c for c in sel if not _recorded(c, a.out)]
    if a.solder_commands:
        prefix = ["timeout", str(a.timeout)] if a.timeout else []
        for c in sel:
            tail = ["--compile-only"] if a.compile_only else ["--json", ">>", a.out]
            print(" ".join(prefix + [a.solder, "bench"] + c.solder_args() + tail))
        return 0
    if a.verify_commands:
        prefix = ["timeout", str(a.timeout)] if a.timeout else []
        for c in sel:
            print(" ".join(prefix + [a.solder, "run", "--backend", "cuda"] + c.solder_args()))
        return 0
    if a.check:
        seen = set()
        for c in sel:
            for small in (True, False):
                ins, outs = c.tensors(small)
                if c.workload not in seen:
                    seen.add(c.workload)
                    print(f"{c.example}: small dims {c.dims(True)}")
                    for t in ins:
                        print(f"    in  {t.name}{list(t.shape)} : {t.dtype} {t.dist or ''}")
                    for t in outs:
                        print(f"    out {t.name}{list(t.shape)} : {t.dtype}")
        print(f"{len(sel)} cases read")
        return 0
    print(f"| case | suite | example | dims | GFLOP | floor MB | floor µs (H100 ref. ceilings) |")
    print("|---|---|---|---|---|---|---|")
    for c in sel:
        dims = " ".join(f"{k}={v}" for k, v in c.overrides.items())
        print(f"| {c.id} | {c.suite} | {c.example} | {dims} | {c.flops() / 1e9:.3g} | "
              f"{c.floor_bytes() / 1e6:.4g} | {floor_us(c):.4g} |")
    print(f"\n{len(sel)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
