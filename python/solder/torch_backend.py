"""torch.compile(model, backend="solder").

Dynamo hands the backend an FX graph; Inductor's compile_fx runs AOTAutograd (functionalization and
Inductor's decompositions into ATen) and calls ``_inner_compile`` with each ATen graph. There:

1. a CapabilityBasedPartitioner groups the nodes that ``fx_translate.supported`` accepts;
2. each partition becomes a Solder program (.sol text, ``fx_translate.translate``), compiled by
   ``solder.compile`` (the GPU for CUDA tensors, the CPU executor for CPU tensors), and is replaced by
   one call of the custom op ``solder::call`` (a ``torch.library.custom_op`` with a fake
   implementation, so graphs stay traceable and CUDA-graph capture works);
3. Inductor compiles the rest (what did not translate, with the reasons kept for ``solder.explain``).

A training graph's forward goes through the same steps; its backward runs on Inductor (said once
through ``warnings``). A partition whose program Solder refuses falls back to Inductor, with the
reason recorded.

Linear layers (a 2-D mm/addmm with a weight: an operand that is, through views, an input of the graph)
go to Inductor by default, which runs them on cuBLAS: on the H100, Solder's fused path runs a plain
GEMM several times slower than cuBLAS (bench/results/h100/torch_modules.md). The option
``options={"solder.linear": "solder"}`` (or ``SOLDER_TORCH_LINEAR=solder``) hands them to Solder too;
``"gated"`` hands Solder only the gated pairs (SwiGLU's gate and up projections, ``gated_pairs``), which
it runs as one dual-B launch with the gating as the epilogue.
``mode`` and the other ``options`` are Inductor's (``mode="reduce-overhead"`` captures CUDA graphs).
"""
import functools
import json
import math
import operator
import os
import sys
import warnings
from dataclasses import dataclass, field

import torch
import torch._functorch.config
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

from . import fx_translate
from ._kernel import compile as solder_compile
from .errors import SolderError

MIN_PARTITION_NODES = 2  # a partition of fewer ATen nodes (views not counted) stays with Inductor


# ---- The custom op ---------------------------------------------------------------------------------

# The op's string argument is the program itself, headed by a comment line that gives the torch shapes
# and dtypes of its outputs: a graph that Inductor or AOTAutograd cached on disk and loads in another
# process needs nothing else (the kernels are compiled on first use and kept in solder.compile's cache).
_HEADER = "# solder::call outputs "


def _op_source(text, output_shapes, output_dtypes) -> str:
    outs = json.dumps([[list(s), str(d).replace("torch.", "")] for s, d in zip(output_shapes, output_dtypes)])
    return _HEADER + outs + "\n" + text


def _op_outputs(source):
    first = source.split("\n", 1)[0]
    if not first.startswith(_HEADER):
        raise SolderError("solder::call: the program does not start with its outputs line")
    return [(tuple(s), getattr(torch, d)) for s, d in json.loads(first[len(_HEADER):])]


# A program that reads a buffer's values as index expressions (fx_translate.tril_constant: nanoGPT's
# causal mask) has a second line: the inputs it guards on and the program to run when a guard fails
# (the same partition translated with the buffer read as a tensor). The call checks each guarded
# tensor's values once per (storage, version): a buffer changed in place after the compile runs the
# fallback, never a wrong mask.
_GUARDS = "# solder::call guards "


def _op_guards(text, guards, fallback) -> str:
    if not guards:
        return text
    return _GUARDS + json.dumps({"guards": [list(g) for g in guards], "fallback": fallback}) + "\n" + text


_guard_cache = {}


def _guard_holds(x, kind) -> bool:
    key = (kind, x.device, x.data_ptr(), x._version, tuple(x.shape), tuple(x.stride()), x.dtype)
    if key not in _guard_cache:
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            return False  # no values can be read during capture: the fallback program is captured
        if len(_guard_cache) > 1024:
            _guard_cache.clear()
        _guard_cache[key] = kind == "tril" and fx_translate.tril_constant(x)
    return _guard_cache[key]


def _choose_program(program, inputs):
    """(program text, inputs it declares): the guarded program when every guard holds, else the fallback."""
    first, rest = program.split("\n", 1)
    if not rest.startswith(_GUARDS):
        return program, inputs
    line, text = rest.split("\n", 1)
    info = json.loads(line[len(_GUARDS):])
    guarded = {k for k, _ in info["guards"]}
    if all(_guard_holds(inputs[k], kind) for k, kind in info["guards"]):
        return program, [x for k, x in enumerate(inputs) if k not in guarded]
    return first + "\n" + info["fallback"], inputs


_SOLDER_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "bool": torch.bool}


@torch.library.custom_op("solder::call", mutates_args=())
def solder_call(program: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs `program` (.sol text headed by its outputs line) on `inputs`; returns its outputs (new tensors)."""
    device = inputs[0].device if inputs else torch.device("cpu")
    program, inputs = _choose_program(program, inputs)
    kernel = solder_compile(program, device="cuda" if device.type == "cuda" else "cpu")
    args = []
    for x, (_, shape, dtype) in zip(inputs, kernel.inputs):
        want = _SOLDER_TORCH_DTYPES[dtype]
        x = (x if x.dtype == want else x.to(want)).contiguous()
        if tuple(x.shape) != tuple(shape):  # the program declares inputs without their dims of size 1
            x = x.view(shape)
        if x.is_cuda and x.data_ptr() % 16:  # a view at an odd offset: Solder's kernels need 16-byte alignment
            x = x.clone()
        args.append(x)
    outs = kernel.allocate_outputs(args[0] if args else torch.empty(0, device=device))
    kernel(*args, out=outs)
    # an output may be declared without its dims of size 1 (fx_translate.Builder.output_from_definition)
    return [(o if o.dtype == dt else o.to(dt)).view(shape) for o, (shape, dt) in zip(outs, _op_outputs(program))]


@solder_call.register_fake
def _solder_call_fake(program, inputs):
    device = inputs[0].device if inputs else torch.device("cpu")
    return [torch.empty(s, dtype=dt, device=device) for s, dt in _op_outputs(program)]


# ---- Partitioning --------------------------------------------------------------------------------

LINEAR_POLICIES = ("inductor", "solder", "gated")


def _linear_policy(value=None) -> str:
    value = value or os.environ.get("SOLDER_TORCH_LINEAR") or "inductor"
    if value not in LINEAR_POLICIES:
        raise SolderError(f"solder.linear: expected one of {', '.join(LINEAR_POLICIES)}, found {value!r}")
    return value


def _graph_input(node, depth=0):
    """Whether `node` is, through view-like nodes, an input of the graph (a weight, a buffer)."""
    while node.op == "call_function" and node.target in fx_translate.VIEWS and depth < 16:
        node, depth = node.args[0], depth + 1
    return node.op in ("placeholder", "get_attr")


def is_linear_layer(node) -> bool:
    """A 2-D mm/addmm one of whose operands is a graph input seen through views: nn.Linear after
    AOTAutograd (permute of the weight, then mm or addmm)."""
    if node.op != "call_function" or node.target not in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return False
    a, b = node.args[-2], node.args[-1]
    return any(hasattr(x, "op") and _graph_input(x) for x in (a, b))


def _linear_source(node):
    """The activation operand of a linear layer's mm/addmm (the one that is not a weight), through views."""
    a = node.args[-2]
    while hasattr(a, "op") and a.op == "call_function" and a.target in fx_translate.VIEWS:
        a = a.args[0]
    return a


GATE_DEPTH = 12  # element-wise nodes between a gated pair's products and the product of the two


def gated_pairs(graph) -> set:
    """The linear layers that come in gated pairs: two mm/addmm reading the same activation whose results
    meet, each through element-wise nodes only (SiLU, GELU, conversions, views), in one `mul`: SwiGLU's
    silu(x·Wg) · (x·Wu). Solder runs such a pair as one dual-B launch of the GEMM skeleton with the
    gating as its epilogue (neither product is stored), where cuBLAS needs two GEMMs and a kernel that
    reads both results back."""
    linears = [n for n in graph.nodes if is_linear_layer(n)]
    reach = {}
    for lin in linears:
        seen, frontier = set(), [lin]
        for _ in range(GATE_DEPTH):
            nxt = []
            for x in frontier:
                for u in x.users:
                    if u.op == "call_function" and u not in seen and u.target not in (
                            torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default):
                        seen.add(u)
                        nxt.append(u)
            frontier = nxt
        reach[lin] = {u for u in seen if u.target is torch.ops.aten.mul.Tensor}
    found = set()
    for i, a in enumerate(linears):
        for b in linears[i + 1:]:
            if _linear_source(a) is _linear_source(b) and reach[a] & reach[b]:
                found |= {a, b}
    return found


TABLE_TARGETS = (torch.ops.aten.sin.default, torch.ops.aten.cos.default)
TABLE_MIN_REUSE = 4  # a table is read by a consumer at least this many times its size


def table_nodes(graph) -> set:
    """The nodes that compute a table: a sin or cos whose inputs are no larger than itself (RoPE's
    cos(position · frequency) over [T, D], from an arange and a [D/2] buffer), with all its ancestors and
    the small element-wise nodes after it (the cast to the graph's dtype), when a consumer reads it
    broadcast over at least TABLE_MIN_REUSE times its size (Q and K's [B, H, T, D]). These stay with
    Inductor, which writes the table once; Solder's fused kernel reads it. In one Solder program the
    table would be inlined and recomputed for every element that reads it (run 8: the stacked RoPE
    kernel compute-bound on sin/cos of every element of Q and K, 40 heads)."""
    found = set()
    for n in graph.nodes:
        if n.op != "call_function" or n.target not in TABLE_TARGETS:
            continue
        size = _numel(n)
        if size == 0:
            continue
        small = lambda x: 0 < _numel(x) <= size
        cone, stack, ok = set(), [n], True
        while stack and ok:
            x = stack.pop()
            if x in cone:
                continue
            if x.op in ("placeholder", "get_attr"):
                ok = small(x) or _numel(x) == 1
                continue
            if x.op != "call_function" or not (small(x) or _numel(x) == 1) or x.target is operator.getitem:
                ok = False
                continue
            cone.add(x)
            stack += list(x.all_input_nodes)
        if not ok:
            continue
        grew = True
        while grew:  # the small element-wise nodes that read only the cone (the cast to bf16)
            grew = False
            for x in list(cone):
                for u in x.users:
                    if u not in cone and u.op == "call_function" and small(u) and u.target is not operator.getitem \
                            and all(a in cone for a in u.all_input_nodes):
                        cone.add(u)
                        grew = True
        if any(_numel(u) >= TABLE_MIN_REUSE * size for x in cone for u in x.users if u not in cone):
            found |= cone
    return found


class _Support(OperatorSupport):
    def __init__(self, reasons, linear="inductor", gated=frozenset(), tables=frozenset()):
        super().__init__()
        self.reasons = reasons
        self.linear = linear
        self.gated = gated
        self.tables = tables

    def is_node_supported(self, submodules, node) -> bool:
        why = fx_translate.supported(node)
        if why is None and node in self.tables:
            why = ("part of a table (sin/cos of small inputs, read broadcast): Inductor writes it once, Solder's "
                   "kernel reads it rather than recomputing it for every element")
        if why is None and self.linear == "inductor" and is_linear_layer(node):
            why = "a linear layer (GEMM with a weight): cuBLAS through Inductor (options={'solder.linear': 'solder'} gives it to Solder)"
        if why is None and self.linear == "gated" and is_linear_layer(node) and node not in self.gated:
            why = ("a linear layer that is not one of a gated pair: cuBLAS through Inductor (solder.linear='gated' gives "
                   "Solder only the pairs it runs as one dual-B launch)")
        if why is not None and node.op == "call_function":
            self.reasons[node.name] = why
        return why is None


# ---- What each node costs (for the coverage that solder.explain and the benchmark report) ----------

def _numel(node):
    try:
        n = 1
        for s in fx_translate._shape(node):
            n *= s
        return n
    except fx_translate.Unsupported:
        return 0


def _itemsize(node):
    v = node.meta.get("val")
    v = v[0] if isinstance(v, (tuple, list)) and v else v
    return getattr(getattr(v, "dtype", None), "itemsize", 4) or 4


def node_cost(node):
    """(floating-point operations, bytes written) of one ATen node, as an unfused run would spend them:
    2·M·N·K for matrix products, 4·L·S·D per head for SDPA, one operation per element read or written
    for the rest; views cost nothing."""
    aten = torch.ops.aten
    t = node.target
    if node.op != "call_function" or t in fx_translate.VIEWS or t is operator.getitem:
        return 0, 0
    try:
        if t in (aten.mm.default, aten.addmm.default):
            a = node.args[-2]
            m, n = fx_translate._shape(node)
            k = fx_translate._shape(a)[-1]
            return 2 * m * n * k + (m * n if t is aten.addmm.default else 0), m * n * _itemsize(node)
        if t is aten.bmm.default:
            b, m, n = fx_translate._shape(node)
            k = fx_translate._shape(node.args[0])[-1]
            return 2 * b * m * n * k, b * m * n * _itemsize(node)
        if t in fx_translate.SDPA:
            q, k = fx_translate._shape(node.args[0]), fx_translate._shape(node.args[1])
            heads = 1
            for s in q[:-2]:
                heads *= s
            out = heads * q[-2] * q[-1]
            return 4 * heads * q[-2] * k[-2] * q[-1], out * _itemsize(node.args[0])
        ins = sum(_numel(a) for a in node.all_input_nodes)
        if isinstance(node.meta.get("val"), (tuple, list)):
            return ins, 0
        return max(ins, _numel(node)), _numel(node) * _itemsize(node)
    except (fx_translate.Unsupported, ValueError, TypeError, IndexError):
        return 0, 0


_VIEWISH = fx_translate.VIEWS | {operator.getitem}
# One node that is a fused kernel's worth of work on its own (a partition of just it is kept).
_COMPOSITE = fx_translate.SDPA | {torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default,
                                  torch.ops.aten.native_layer_norm.default, torch.ops.aten.var_mean.correction}


@dataclass
class Explanation:
    partitions: list = field(default_factory=list)   # dicts: nodes, program (text), error
    fallback: dict = field(default_factory=dict)     # node name -> reason
    notes: list = field(default_factory=list)
    costs: dict = field(default_factory=dict)        # node name -> (flops, bytes written), node_cost

    def on_solder(self) -> set:
        return {n for p in self.partitions if not p.get("error") for n in p["nodes"]}

    def coverage(self) -> dict:
        """Fractions of the graph's ATen nodes, FLOPs and bytes written that Solder's kernels took."""
        on = self.on_solder()
        names = set(self.costs) | on | set(self.fallback)
        flops = sum(c[0] for c in self.costs.values())
        written = sum(c[1] for c in self.costs.values())
        return {"nodes": len(on), "total_nodes": len(on) + len(set(self.fallback) - on),
                "flops": sum(self.costs.get(n, (0, 0))[0] for n in on), "total_flops": flops,
                "bytes": sum(self.costs.get(n, (0, 0))[1] for n in on), "total_bytes": written,
                "all_nodes": len(names)}

    @staticmethod
    def schedule(partition) -> list:
        """Where the partition's contractions run on the GPU (Kernel.schedule: the skeleton, its
        configuration and work tiles, a staged bias, or why not), made once on first use from the
        program (the CUDA backend's plan; no GPU needed) and kept in partition["schedule"]."""
        if "schedule" not in partition and partition.get("program") and not partition.get("error"):
            try:
                partition["schedule"] = solder_compile(partition["program"], device="cpu").schedule()
            except SolderError as e:
                partition["schedule"] = [f"(no GPU plan: {str(e).splitlines()[0]})"]
        return partition.get("schedule", [])

    def format(self) -> str:
        lines = []
        c = self.coverage()
        translated, total = c["nodes"], c["total_nodes"]
        flops = f", {100 * c['flops'] / c['total_flops']:.0f} % of the FLOPs" if c["total_flops"] else ""
        lines.append(f"solder: {len(self.partitions)} partition(s), {translated} of {total} ATen nodes on Solder{flops}")
        for k, p in enumerate(self.partitions):
            state = f"fell back: {p['error']}" if p.get("error") else "Solder"
            lines.append(f"-- partition {k} ({len(p['nodes'])} nodes, {state}): {', '.join(p['nodes'])}")
            if p.get("stacked"):
                lines.append(f"   one output, stacked (read as slices): {', '.join(p['stacked'])}")
            if p.get("guards"):
                lines.append(f"   guarded on the values of {', '.join(p['guards'])} (read as index expressions; "
                             "changed in place, the call runs the program that reads them)")
            if p.get("program"):
                lines += ["   " + l for l in p["program"].rstrip().splitlines()]
                if not p.get("error"):
                    lines += ["   gpu: " + l for l in self.schedule(p)]
        if self.fallback:
            lines.append("-- left to Inductor:")
            for name, why in self.fallback.items():
                lines.append(f"   {name}: {why}")
        lines += [f"-- {n}" for n in self.notes]
        return "\n".join(lines)


_last_explanations: list = []


def partition_and_replace(gm, explanation=None, linear=None, constants=None):
    """Replaces every translatable partition of the ATen graph `gm` by a call of solder::call. Returns
    the rewritten graph module (in place). `linear`: "inductor" (default), "solder" or "gated", see the module's
    documentation. `constants`: placeholder node -> the tensor it holds at compile time (the module's
    buffers; `_inner_compile` maps them), whose values the translator may read (fx_translate.translate)."""
    explanation = explanation if explanation is not None else Explanation()
    gm.graph.eliminate_dead_code()  # unused results (SDPA's log-sum-exp) must not block a partition
    _softmax_scale_back(gm)
    _distribute_products(gm)
    _scale_after_products(gm)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            explanation.costs[n.name] = node_cost(n)
    reasons = {}
    policy = _linear_policy(linear)
    gated = gated_pairs(gm.graph) if policy == "gated" else frozenset()
    support = _Support(reasons, policy, gated, table_nodes(gm.graph))
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups = []
    for part in partitioner.propose_partitions():
        for g in _split_at_attention(sorted(part.nodes, key=order.get)):
            for h in _split_at_products(g):
                groups += _split_components(h)
    for k, group in enumerate(groups):
        group, relayout = _relayout_at_batched_products(group)
        for n in relayout:
            explanation.fallback[n.name] = ("a relayout view of a batched product's operand or result, left to "
                                            "Inductor: the product reads and writes whole [.., rows, cols] tiles")
        group, reshapes = _trailing_reshapes(group)
        for n in reshapes:
            explanation.fallback[n.name] = ("a reshape of the partition's result, left to Inductor (free on the "
                                            "contiguous result; the program writes the value in its own shape)")
        nodes, pure = _without_input_views(group)
        for n in group:
            if n not in nodes:
                explanation.fallback[n.name] = "a view of graph values alone, which Inductor takes for free (Solder would copy it)"
        if not nodes:
            continue
        real = [n for n in nodes if n.target not in _VIEWISH]
        info = {"nodes": [n.name for n in nodes]}
        explanation.partitions.append(info)
        composite = any(n.target in _COMPOSITE for n in nodes)
        if len(real) < MIN_PARTITION_NODES and not composite:
            info["error"] = f"too small (fewer than {MIN_PARTITION_NODES} compute nodes)"
            for n in nodes:
                explanation.fallback[n.name] = "partition too small for Solder"
            continue
        members = set(nodes)
        inputs, outputs = [], []
        for n in nodes:
            for a in n.all_input_nodes:
                if a not in members and a not in inputs:
                    inputs.append(a)
            if n not in pure and any(u not in members for u in n.users):
                outputs.append(n)
        try:
            known = {n: (constants or {}).get(n) for n in inputs if (constants or {}).get(n) is not None}
            program = fx_translate.translate(f"fx_partition_{k}", nodes, inputs, outputs, constants=known)
            fallback = None
            if program.guards:  # the same partition reading the guarded tensors, for a failed guard
                fallback = fx_translate.translate(f"fx_partition_{k}", nodes, inputs, outputs).text
                solder_compile(fallback, device="cpu")
                info["guards"] = [f"{inputs[i].name}: {kind}" for i, kind in program.guards]
            info["program"] = program.text
            kernel = solder_compile(program.text, device="cpu")  # verify now (the program, not the device)
            del kernel
        except (fx_translate.Unsupported, SolderError) as e:
            info["error"] = str(e).splitlines()[0]
            for n in nodes:
                explanation.fallback[n.name] = f"partition refused: {info['error']}"
            continue
        first = {}  # program output -> the first output node that reads it
        for n, i in zip(outputs, program.output_index):
            first.setdefault(i, n)
        unique = [first[i] for i in range(len(program.output_dtypes))]
        source = _op_source(_op_guards(program.text, program.guards, fallback), program.output_shapes, program.output_dtypes)
        stacked = any(program.output_slices)
        if stacked:
            info["stacked"] = [f"{n.name}: [{', '.join(':' if d != sl[0] else f'{sl[1]}:{sl[2]}' for d in range(len(program.output_shapes[0])))}]"
                               for n, sl in zip(outputs, program.output_slices)]
        last = nodes[-1]
        with gm.graph.inserting_after(last):
            call = gm.graph.call_function(torch.ops.solder.call.default, (source, list(inputs)))
            call.meta["val"] = ([_like(unique[0].meta["val"], program.output_shapes[0])] if stacked
                                else [n.meta["val"] for n in unique])
        guarded = {k for k, _ in program.guards}  # read by the call's guard as they are (a buffer's storage)
        call.args = (source, [a if k in guarded else _contiguous_input(gm, a, call) for k, a in enumerate(inputs)])
        for n, i, sl in zip(outputs, program.output_index, program.output_slices):
            with gm.graph.inserting_after(call):
                item = gm.graph.call_function(operator.getitem, (call, i))
                item.meta["val"] = call.meta["val"][i] if sl else n.meta["val"]
            if sl:  # one of several outputs stacked into one (fx_translate.stack_outputs): its slice
                with gm.graph.inserting_after(item):
                    part = gm.graph.call_function(torch.ops.aten.slice.Tensor, (item, sl[0], sl[1], sl[2]))
                    part.meta["val"] = _sliced(item.meta["val"], *sl)
                n.replace_all_uses_with(part, delete_user_cb=lambda u: u not in members and u is not item and u is not part)
            else:
                n.replace_all_uses_with(item, delete_user_cb=lambda u: u not in members and u is not item)
    for name, why in reasons.items():
        explanation.fallback.setdefault(name, why)
    _legalize(gm)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return gm


def _like(val, shape):
    """A new contiguous tensor of `shape` like the fake (or meta) tensor `val`: its dtype, device and mode."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty(tuple(shape), dtype=val.dtype, device=val.device)
    with mode:
        return torch.empty(tuple(shape), dtype=val.dtype, device=val.device)


def _sliced(val, dim, start, end):
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.ops.aten.slice.Tensor(val, dim, start, end)
    with mode:
        return torch.ops.aten.slice.Tensor(val, dim, start, end)


_GQA_VIEWS = {torch.ops.aten.unsqueeze.default, torch.ops.aten.expand.default, torch.ops.aten.clone.default,
              torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default}


_RELAYOUT_OUTPUT = "solder_relayout_output"  # node meta: a view chain's end that a partition writes out


def _relayout_chain(a, members):
    """The nodes of the view chain ending at `a` inside the partition (a first), when it reads a value
    from outside the partition and contains a permute or transpose; else []."""
    chain, x = [], a
    while hasattr(x, "op") and x in members and x.op == "call_function" and x.target in fx_translate.VIEWS:
        chain.append(x)
        x = x.args[0]
    if not chain or (hasattr(x, "op") and x in members):
        return []
    if not any(c.target in (torch.ops.aten.permute.default, torch.ops.aten.transpose.int) for c in chain):
        return []
    return chain


def _relayout_operands(sdpa, members):
    """SDPA's operands (seen through GQA's expansion views) that are relayout view chains of outside values."""
    found = []
    for a in sdpa.args[:3]:
        while hasattr(a, "op") and a in members and a.op == "call_function" and a.target in _GQA_VIEWS \
                and len(a.users) == 1:
            a = a.args[0]
        if hasattr(a, "op") and len(a.users) == 1 and _relayout_chain(a, members) and a not in found:
            found.append(a)
    return found


def _split_at_attention(nodes):
    """A partition whose SDPA reads a query, key or value computed in the partition (RoPE's rotation)
    becomes two: what computes the operands, then the attention. Solder inlines element-wise work into
    its consumers, so in one program the rotation would be recomputed for every key tile inside the
    score contraction, and the tensor-core emitter takes only operands read from memory; across two
    partitions the rotated operands are written once and the attention reads plain [B, H, T, D] tiles."""
    members = set(nodes)
    for s in nodes:
        if s.target not in fx_translate.SDPA:
            continue
        operands = []
        for a in s.args[:3]:
            # the views right before the attention (GQA's repeat_interleave: unsqueeze, expand, clone,
            # view) stay with it, read as k[h // G] there, rather than written expanded by the first part
            while hasattr(a, "op") and a in members and a.op == "call_function" and a.target in _GQA_VIEWS \
                    and len(a.users) == 1:
                a = a.args[0]
            if hasattr(a, "op") and a in members:
                operands.append(a)
        before, stack = set(), list(operands)
        while stack:
            n = stack.pop()
            if n in before or n not in members:
                continue
            before.add(n)
            stack += list(n.all_input_nodes)
        if not any(n.target not in _VIEWISH for n in before):
            continue  # the operands are views of the partition's inputs: nothing to write first
        # An operand that is only a relayout of an outside value (V: the [T, Hkv·D] projection viewed and
        # transposed to [1, Hkv, T, D]) is written by the first part too, beside the rotated Q and K: one
        # kernel for all three (fx_translate.stack_outputs) instead of a copy of V of its own.
        for a in _relayout_operands(s, members):
            chain = _relayout_chain(a, members)
            before |= set(chain)
            a.meta[_RELAYOUT_OUTPUT] = True
        first = [n for n in nodes if n in before]
        rest = [n for n in nodes if n not in before]
        return _split_at_attention(first) + _split_at_attention(rest)
    return [nodes]


def _pv_product(x, members):
    """Whether x is a bmm whose first operand is computed in the partition from another bmm (attention's
    P · V: the probabilities come from the scores)."""
    if x.op != "call_function" or x.target is not torch.ops.aten.bmm.default:
        return False
    seen, stack = set(), [x.args[0]]
    while stack:
        n = stack.pop()
        if n in seen or n not in members:
            continue
        seen.add(n)
        if n.op == "call_function" and n.target is torch.ops.aten.bmm.default:
            return True
        stack += list(n.all_input_nodes)
    return False


def _split_at_products(nodes):
    """A partition with more than one attention written with bmm (P · V products) becomes one partition
    per attention (what computes it, the product and its view to [lead.., rows, cols]), then the rest.
    Solder fuses one attention per kernel on its attention paths; two in one program are fused into
    neither (differential attention: both score matrices through global memory)."""
    members = set(nodes)
    products = [x for x in nodes if _pv_product(x, members)]
    if not products:
        return [nodes]
    if len(products) == 1:
        # one attention: split only when the partition computes more from its result than views (an
        # output gate, Evoformer's sigmoid(g) ·): the attention paths store the result whole, with no
        # epilogue; the rest reads it from memory.
        pv = products[0]
        stack, after = [pv], []
        while stack:
            x = stack.pop()
            for u in x.users:
                if u in members and u not in after:
                    after.append(u)
                    stack.append(u)
        if all(u.op == "call_function" and u.target in _VIEWISH for u in after):
            return [nodes]
        # ... and only when the rest is a partition of its own (else it would fall back to Inductor)
        group, stack = set(), [pv]
        while stack:
            n = stack.pop()
            if n not in group and n in members:
                group.add(n)
                stack += list(n.all_input_nodes)
        rest = [x for x in nodes if x not in group and x not in after[:1]]
        real = [x for x in rest if x.target not in _VIEWISH]
        if len(real) < MIN_PARTITION_NODES and not any(x.target in _COMPOSITE for x in rest):
            return [nodes]
    groups, taken = [], set()
    for pv in products:
        group, stack = set(), [pv]
        while stack:
            n = stack.pop()
            if n in group or n in taken or n not in members:
                continue
            group.add(n)
            stack += list(n.all_input_nodes)
        users = list(pv.users)
        if len(users) == 1 and users[0] in members and users[0].target in fx_translate.VIEWS:
            group.add(users[0])
        taken |= group
        groups.append([x for x in nodes if x in group])
    rest = [x for x in nodes if x not in taken]
    return groups + ([rest] if rest else [])


def _distribute_products(gm):
    """bmm(A - c·B, V) → bmm(A, V) - c·bmm(B, V) (and A + c·B, A - B, A + B), when A and B are computed
    (not views of graph inputs) and have the difference's shape: differential attention's
    `(a1 - λ·a2) @ v`, two softmaxes, becomes two attentions that each keep their probabilities on chip
    (`_split_at_products`), then one element-wise combine of their [.., T, D] results. The same value
    in exact arithmetic; each product accumulates in f32 and is rounded to the graph's dtype, as the
    single product's result is."""
    aten = torch.ops.aten
    views = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default)
    for bmm in list(gm.graph.nodes):
        if bmm.op != "call_function" or bmm.target is not aten.bmm.default:
            continue
        chain, x = [], bmm.args[0]
        while x.op == "call_function" and x.target in views and len(x.users) == 1:
            chain.append(x)
            x = x.args[0]
        if x.op != "call_function" or x.target not in (aten.sub.Tensor, aten.add.Tensor) or len(x.users) != 1 \
                or x.kwargs.get("alpha", 1) != 1 or len(x.args) != 2:
            continue
        terms = []
        for t in x.args:
            c = 1.0
            if hasattr(t, "op") and t.op == "call_function" and t.target in (aten.mul.Tensor, aten.mul.Scalar) \
                    and isinstance(t.args[1], (int, float)) and not isinstance(t.args[1], bool) and len(t.users) == 1:
                t, c = t.args[0], float(t.args[1])
            terms.append((t, c))
        shape = fx_translate._shape(x) if "val" in x.meta else None
        if shape is None or not all(hasattr(t, "op") and "val" in t.meta and fx_translate._shape(t) == shape
                                    and not _graph_input(t) and t.meta["val"].dtype == x.meta["val"].dtype
                                    for t, _ in terms):
            continue
        parts = []
        with gm.graph.inserting_before(bmm):
            for t, c in terms:
                y = t
                for v in reversed(chain):
                    y2 = gm.graph.call_function(v.target, (y,) + tuple(v.args[1:]), dict(v.kwargs))
                    y2.meta["val"] = v.meta["val"]
                    y = y2
                p = gm.graph.call_function(aten.bmm.default, (y, bmm.args[1]))
                p.meta["val"] = bmm.meta["val"]
                if c != 1.0:
                    p2 = gm.graph.call_function(aten.mul.Tensor, (p, c))
                    p2.meta["val"] = bmm.meta["val"]
                    p = p2
                parts.append(p)
            combined = gm.graph.call_function(x.target, (parts[0], parts[1]))
            combined.meta["val"] = bmm.meta["val"]
        bmm.replace_all_uses_with(combined)
    gm.graph.eliminate_dead_code()


def _softmax_scale_back(gm):
    """(x - amax(x)) * c → (x·c) - amax(x·c) for a constant c > 0: Inductor's joint-graph pass writes
    softmax(x * c) as exp((x - max(x)) * c) (on the GPU: x * 1 first, the sign of c); Solder's attention
    paths take the scaled score whose max is subtracted (the scale then folds into the score sum,
    fx_translate.Translator._constant_factor). The same value in exact arithmetic (max(c·x) = c·max(x)
    for c > 0)."""
    aten = torch.ops.aten
    for mul in list(gm.graph.nodes):
        if mul.op != "call_function" or mul.target is not aten.mul.Tensor or len(mul.args) != 2:
            continue
        sub, c = mul.args
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(float(c)) or c <= 0:
            continue
        if not (hasattr(sub, "op") and sub.op == "call_function" and sub.target is aten.sub.Tensor and len(sub.users) == 1
                and len(sub.args) == 2 and not sub.kwargs):
            continue
        x, m = sub.args
        if not (hasattr(m, "op") and m.op == "call_function" and m.target is aten.amax.default and m.args[0] is x
                and len(m.users) == 1 and "val" in x.meta and "val" in m.meta):
            continue
        with gm.graph.inserting_before(m):
            scaled = gm.graph.call_function(aten.mul.Tensor, (x, c))
            scaled.meta["val"] = x.meta["val"]
            m2 = gm.graph.call_function(aten.amax.default, (scaled,) + tuple(m.args[1:]), dict(m.kwargs))
            m2.meta["val"] = m.meta["val"]
        with gm.graph.inserting_before(mul):
            s2 = gm.graph.call_function(aten.sub.Tensor, (scaled, m2))
            s2.meta["val"] = mul.meta["val"]
        mul.replace_all_uses_with(s2)
    gm.graph.eliminate_dead_code()


def _scale_after_products(gm):
    """bmm(views(X / c), B) → bmm(views(X), B) / c (and X * c): Evoformer's `q / sqrt(c)` before its
    product. The bmm's operand is then a view of a stored value (which `_relayout_at_batched_products`
    hands over whole) and the translator applies the constant inside the product's sum (the score form
    of the attention paths). The same value in exact arithmetic; inside a partition Solder computes both
    in f32 (the graph would round X / c to its dtype first)."""
    aten = torch.ops.aten
    views = (aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default, aten.clone.default)
    scalings = (aten.mul.Tensor, aten.div.Tensor)
    for bmm in list(gm.graph.nodes):
        if bmm.op != "call_function" or bmm.target is not aten.bmm.default:
            continue
        for pos in (0, 1):
            chain, x = [], bmm.args[pos]
            while hasattr(x, "op") and x.op == "call_function" and x.target in views and len(x.users) == 1:
                chain.append(x)
                x = x.args[0]
            if not (hasattr(x, "op") and x.op == "call_function" and x.target in scalings and len(x.users) == 1
                    and len(x.args) == 2 and hasattr(x.args[0], "op") and isinstance(x.args[1], (int, float))
                    and not isinstance(x.args[1], bool) and math.isfinite(float(x.args[1])) and x.args[1] != 0):
                continue
            if "val" not in x.meta or "val" not in x.args[0].meta or x.meta["val"].dtype != x.args[0].meta["val"].dtype:
                continue
            with gm.graph.inserting_before(bmm):
                y = x.args[0]
                for v in reversed(chain):
                    y2 = gm.graph.call_function(v.target, (y,) + tuple(v.args[1:]), dict(v.kwargs))
                    y2.meta["val"] = v.meta["val"]
                    y = y2
                args = list(bmm.args)
                args[pos] = y
                p = gm.graph.call_function(aten.bmm.default, tuple(args))
                p.meta["val"] = bmm.meta["val"]
                scaled = gm.graph.call_function(x.target, (p, x.args[1]))
                scaled.meta["val"] = bmm.meta["val"]
            bmm.replace_all_uses_with(scaled)
            gm.graph.erase_node(bmm)
            for v in chain:
                if not v.users:
                    gm.graph.erase_node(v)
            if not x.users:
                gm.graph.erase_node(x)
            break  # one scaling per product
    gm.graph.eliminate_dead_code()


_ROW_REDUCTIONS = set(fx_translate.REDUCTIONS) | {torch.ops.aten.var.correction, torch.ops.aten.var_mean.correction,
                                                   torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default,
                                                   torch.ops.aten.native_layer_norm.default}


def _split_components(nodes):
    """A partition of independent parts (no value of one read by another), each with a reduction, becomes
    one partition per part: Evoformer's two LayerNorms (of m and of z) in one program fuse into four
    kernels, statistics and normalisation apart (the fusion planner's choice for a program of two
    unrelated cascades), and into one kernel each as programs of their own (`solder fuse --gpu`).
    Parts without a reduction stay together (Llama's rotated Q and K and V's relayout: one stacked
    kernel, fx_translate.stack_outputs)."""
    members = set(nodes)
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] is not x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in nodes:
        for a in n.all_input_nodes:
            if a in members:
                ra, rn = find(a), find(n)
                if ra is not rn:
                    parent[ra] = rn
    parts = {}
    for n in nodes:
        parts.setdefault(find(n), []).append(n)
    # views alone (a weight's transpose for a linear layer on Inductor: _without_input_views drops them)
    # stay with the first part
    computed = [p for p in parts.values() if any(x.target not in _VIEWISH for x in p)]
    if len(computed) < 2 or not all(any(x.target in _ROW_REDUCTIONS for x in p) for p in computed):
        return [nodes]
    first = set(computed[0]) | {x for p in parts.values() if p not in computed for x in p}
    return [[x for x in nodes if x in first]] + [[x for x in nodes if x in set(p)] for p in computed[1:]]


_RESHAPES = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default}


def _trailing_reshapes(nodes):
    """The reshapes at a partition's end (view, _unsafe_view, reshape of a value the partition computes,
    read only outside it, through further reshapes): Inductor takes them for free on the partition's
    contiguous result, and the program writes the value in its own shape. Written through the reshape,
    the program indexes its tensors with // and % of the merged dims, and the fusion planner no longer
    sees that a row statistic and the row it scales share their dims (Evoformer's two LayerNorms,
    `[R, R, C]` viewed as `[R·R, C]` for the linear layers: four kernels, statistics and normalisation
    apart, instead of one each). Reshapes of a batched product's result, of SDPA's, and of a value read
    in the partition stay (the attention paths need their [lead.., rows, cols] form). Returns (nodes kept,
    reshapes moved to Inductor)."""
    members = set(nodes)
    moved = []
    changed = True
    while changed:
        changed = False
        for n in reversed(nodes):
            if n in moved or n.op != "call_function" or n.target not in _RESHAPES:
                continue
            src = n.args[0]
            if not hasattr(src, "op") or src not in members or src in moved:
                continue
            if any(u in members and u not in moved for u in n.users):
                continue
            root = src  # the computed value under a chain of reshapes
            while root.op == "call_function" and root.target in _RESHAPES and root.args[0] in members:
                root = root.args[0]
            if root.op != "call_function" or (root.target in _VIEWISH and root.target is not torch.ops.aten.clone.default) \
                    or root.target in (torch.ops.aten.bmm.default, torch.ops.aten.mm.default) \
                    or root.target in fx_translate.SDPA or n.meta.get(_RELAYOUT_OUTPUT):
                continue
            val = src.meta.get("val")
            if val is None or not isinstance(val, torch.Tensor) or not val.is_contiguous():
                continue
            moved.append(n)
            changed = True
    return [x for x in nodes if x not in moved], [x for x in nodes if x in moved]


def _contiguous_input(gm, a, before):
    """A partition input whose value is not contiguous (a relayout view of a projection left to Inductor:
    Evoformer's q, k, v as [S, H, R, C] views of [S·R, H·C]) is read through an explicit contiguous clone
    in the graph, so that Inductor makes the copy (one Triton kernel, fused with what produces it where it
    can) rather than solder::call's `.contiguous()`, an eager ATen copy at about half the bandwidth."""
    val = a.meta.get("val") if hasattr(a, "meta") else None
    if not isinstance(val, torch.Tensor) or val.is_contiguous():
        return a
    with gm.graph.inserting_before(before):
        c = gm.graph.call_function(torch.ops.aten.clone.default, (a,), {"memory_format": torch.contiguous_format})
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        c.meta["val"] = val.clone(memory_format=torch.contiguous_format)
    else:
        with mode:
            c.meta["val"] = val.clone(memory_format=torch.contiguous_format)
    return c


def _relayout_at_batched_products(nodes):
    """Moves to Inductor the view chains that relayout a batched product's operands and result (nanoGPT's
    attention: q, k and v are slices of one projection, transposed to [B, H, T, D] and merged to
    [B·H, T, D] for bmm; the result is transposed back to [B, T, H·D]). Solder's attention paths read and
    write whole [.., rows, cols] tiles of stored tensors; read through the slices, its tile stager cannot
    copy them and the product stays on scalar code. The partition then reads each operand at its chain's
    [lead.., rows, cols] node (Inductor's view, which the call makes contiguous: one copy, K as [S, D]
    rather than transposed) and writes the result at [lead.., rows, cols] (Inductor's relayout follows).
    Only chains of views of values from outside the partition (operands) or read only outside it
    (results), for a bmm whose merged batch dim shows its lead dims (fx_translate.Translator._bmm_lead).
    Nothing changes what is computed: the same views run on Inductor. Returns (nodes kept, nodes moved)."""
    members = set(nodes)
    views = fx_translate.VIEWS | {operator.getitem, torch.ops.aten.split.Tensor, torch.ops.aten.split_with_sizes.default}
    is_view = lambda x: x.op == "call_function" and x.target in views
    moved = set()

    def chain_back(x):
        chain = []
        while x in members and is_view(x):
            chain.append(x)
            x = x.args[0]
        return chain, x

    for bmm in nodes:
        if bmm.op != "call_function" or bmm.target is not torch.ops.aten.bmm.default:
            continue
        try:
            shape = fx_translate._shape(bmm)
            lead = fx_translate.Translator._bmm_lead(bmm, shape)
            kdim = fx_translate._shape(bmm.args[0])[-1]
        except fx_translate.Unsupported:
            continue
        if not lead:
            continue
        lead, m, n = list(lead), shape[1], shape[2]
        a_chain, a_src = chain_back(bmm.args[0])
        b_chain, _ = chain_back(bmm.args[1])
        pv = a_src in members  # the first operand is computed here (softmax): b is V, [S, Dv]
        for chain, want in ((a_chain, lead + [m, kdim]), (b_chain, lead + ([kdim, n] if pv else [n, kdim]))):
            if not chain or chain[-1].args[0] in members:
                continue  # not a chain of views of a value from outside the partition
            cut = next((x for x in chain if x.target in fx_translate.VIEWS and fx_translate._shape(x) == want), None)
            if cut is not None:
                moved |= set(chain[chain.index(cut):])
        # an additive bias of the scores (Evoformer's pair bias z, [H, R, R] as a permuted view of the
        # [R·R, H] projection): read at its last node before broadcasting views, stored by Inductor
        if not pv and len(bmm.users) == 1:
            scores = bmm  # through its single-use views and constant scalings
            while len(scores.users) == 1 and next(iter(scores.users)) in members and (
                    next(iter(scores.users)).target in fx_translate.VIEWS or
                    next(iter(scores.users)).target in (torch.ops.aten.mul.Tensor, torch.ops.aten.div.Tensor)
                    and not hasattr(next(iter(scores.users)).args[1], "op")):
                scores = next(iter(scores.users))
            for u in list(scores.users):
                if u in members and u.op == "call_function" and u.target is torch.ops.aten.add.Tensor:
                    other = u.args[1] if u.args[0] is scores else u.args[0]
                    chain, _ = chain_back(other) if hasattr(other, "op") else ([], None)
                    if not chain or chain[-1].args[0] in members:
                        continue
                    k = 0
                    while k < len(chain) and chain[k].target in (torch.ops.aten.unsqueeze.default, torch.ops.aten.expand.default):
                        k += 1
                    if k < len(chain) and chain[k].target in (torch.ops.aten.permute.default, torch.ops.aten.transpose.int):
                        moved |= set(chain[k:])
        # the result: bmm -> a view to [lead.., m, n] -> views whose last is read only outside
        users = list(bmm.users)
        if len(users) == 1 and is_view(users[0]) and users[0] in members and fx_translate._shape(users[0]) == lead + [m, n]:
            x, after = users[0], []
            while len(x.users) == 1 and next(iter(x.users)) in members and is_view(next(iter(x.users))):
                x = next(iter(x.users))
                after.append(x)
            if after and all(u not in members for u in x.users):
                moved |= set(after)
    for sdpa in nodes:  # SDPA's result [B, H, T, D] transposed back to [B, T, H·D] for o_proj: the same
        if sdpa.op != "call_function" or sdpa.target not in fx_translate.SDPA:
            continue
        # an operand that is a view chain of an outside value ([B·T, Hkv·D] projection → [B, Hkv, T, D]
        # by a transpose → GQA's expansion): the transpose and what precedes it are Inductor's (one copy of
        # the Hkv heads), the expansion stays (read as v[h // G])
        for a in sdpa.args[:3]:
            if not hasattr(a, "op"):
                continue
            chain, src = chain_back(a)
            if not chain or src in members:
                continue
            k = 0
            while k < len(chain) and chain[k].target in _GQA_VIEWS:
                k += 1
            if k < len(chain) and chain[k].target in (torch.ops.aten.permute.default, torch.ops.aten.transpose.int):
                moved |= set(chain[k:])
        for g in sdpa.users:
            if g.target is not operator.getitem or g.args[1] != 0 or g not in members:
                continue
            x, after = g, []
            while len(x.users) == 1 and next(iter(x.users)) in members and is_view(next(iter(x.users))):
                x = next(iter(x.users))
                after.append(x)
            if after and all(u not in members for u in x.users):
                moved |= set(after)
                _contiguous_before_views(g, after)
    changed = True
    while changed:  # a kept getitem of a moved multi-output node (split) moves too: no tuple crosses over
        changed = False
        for x in nodes:
            if x not in moved and x.target is operator.getitem and x.args[0] in moved:
                moved.add(x)
                changed = True
    return [x for x in nodes if x not in moved], [x for x in nodes if x in moved]


def _contiguous_before_views(start, chain):
    """The chain of views read from `start` was traced on SDPA's result, whose strides are [B, T, H, D];
    Solder's result is contiguous [B, H, T, D]. A view of the chain that cannot view that layout
    (`o.transpose(1, 2).reshape(B, T, -1)`) becomes a reshape: a copy where needed (the one Inductor
    makes anyway), and the graph stays runnable as it is."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    try:
        with unset_fake_temporarily():
            x = torch.empty(tuple(fx_translate._shape(start)), device="meta")
    except fx_translate.Unsupported:
        return
    with unset_fake_temporarily():
        _replay_views(x, chain)


def _replay_views(x, chain):
    for node in chain:
        try:
            x = node.target(x, *node.args[1:], **node.kwargs)
        except (RuntimeError, ValueError):
            if node.target not in (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default):
                return
            node.target = torch.ops.aten.reshape.default
            x = node.target(x, *node.args[1:], **node.kwargs)


def _without_input_views(nodes):
    """The partition's nodes without the view-like ones that read only values from outside it (through
    other such views) and that no other node of the partition reads: a weight's transpose feeding a
    linear layer on Inductor, say. As a partition output Solder would copy it; Inductor takes a view for
    free. Returns (nodes kept, the views of outside values); the latter are never outputs (nodes outside
    read the original view, which stays in the graph)."""
    members = set(nodes)
    pure = set()
    for n in nodes:
        if n.target in _VIEWISH and all(a not in members or a in pure for a in n.all_input_nodes) \
                and not n.meta.get(_RELAYOUT_OUTPUT):
            pure.add(n)
    keep = list(nodes)
    changed = True
    while changed:
        changed = False
        inside = set(keep)
        for n in reversed(keep):
            if n in pure and not any(u in inside for u in n.users):
                keep.remove(n)
                inside.discard(n)
                changed = True
    return keep, pure


def _legalize(gm):
    """Topological order again (a partition's call sits after its last node; users placed between its
    nodes move after it)."""
    from torch.fx.passes.tools_common import legalize_graph

    legalize_graph(gm)


# ---- The backend --------------------------------------------------------------------------------

_backward_warned = False


def _module_constants(gm, example_inputs):
    """The graph inputs of a Dynamo graph that are a module's buffers, with their tensors (the values at
    compile time, which the translator may read: fx_translate.tril_constant): position -> tensor."""
    found = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return found
    for k, (n, x) in enumerate(zip(placeholders, example_inputs)):
        if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter) and "_buffers_" in n.name \
                and not isinstance(x, torch._subclasses.FakeTensor) and x.device.type != "meta":
            found[k] = x
    return found


def _placeholder_constants(gm, constants):
    """AOTAutograd's inference graph takes the Dynamo graph's inputs in the same order: its placeholder k
    holds constants[k] when the shapes agree."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = {}
    for k, x in (constants or {}).items():
        if k < len(placeholders):
            v = placeholders[k].meta.get("val")
            if v is not None and tuple(v.shape) == tuple(x.shape) and v.dtype == x.dtype:
                out[placeholders[k]] = x
    return out


def _inner_compile(gm, example_inputs, linear=None, constants=None, **kwargs):
    from torch._inductor.compile_fx import compile_fx_inner

    global _backward_warned
    if kwargs.get("is_backward"):
        if not _backward_warned:
            warnings.warn("solder: a training graph — the backward runs on Inductor (Solder compiles forward graphs)")
            _backward_warned = True
        return compile_fx_inner(gm, example_inputs, **kwargs)
    explanation = Explanation()
    gm = partition_and_replace(gm, explanation, linear=linear, constants=_placeholder_constants(gm, constants))
    _last_explanations.append(explanation)
    return compile_fx_inner(gm, example_inputs, **kwargs)


def solder_backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The torch.compile backend (``backend="solder"``). ``mode`` is one of Inductor's modes
    (``"reduce-overhead"``: CUDA graphs; ``"max-autotune"``...), applied to what Inductor compiles and
    around the whole graph; ``options`` are Inductor's config options, plus ``"solder.linear"``
    ("inductor", "solder" or "gated": who runs linear layers)."""
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx

    options = dict(options or {})
    linear = _linear_policy(options.pop("solder.linear", None))
    patches = dict(list_mode_options(mode)) if mode and mode != "default" else {}
    patches.update(options)
    inner = functools.partial(_inner_compile, linear=linear, constants=_module_constants(gm, example_inputs))
    # AOTAutograd's cache is keyed on the graph before the partitioner runs, not on the backend: an entry
    # that Inductor alone left for the same model would come back without Solder's kernels. Inductor's
    # FX graph cache stays on (its key is the graph after the partitioner, solder::call included).
    with torch._functorch.config.patch(enable_autograd_cache=False):
        return compile_fx(gm, example_inputs, inner_compile=inner, config_patches=patches or None)


def register():
    """Registers backend="solder" with torch._dynamo (idempotent)."""
    import torch._dynamo

    if "solder" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(name="solder")(solder_backend)


# ---- explain --------------------------------------------------------------------------------------

def explain(model, *inputs, file=None, options=None):
    """Compiles `model` with backend="solder" (inference, under torch.no_grad) and runs it once on
    `inputs`; prints each partition with its program and every node left to Inductor with the reason.
    Returns the list of Explanations (one per ATen graph). `options` as for torch.compile."""
    import torch._dynamo

    import torch._functorch.config
    import torch._inductor.config

    start = len(_last_explanations)
    torch._dynamo.reset()
    # No compile caches: a cached graph would skip the partitioner and leave nothing to explain.
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        torch.compile(model, backend=solder_backend, options=options)(*inputs)
    found = _last_explanations[start:]
    out = file or sys.stdout
    for k, e in enumerate(found):
        print(f"== graph {k}", file=out)
        print(e.format(), file=out)
    return found
