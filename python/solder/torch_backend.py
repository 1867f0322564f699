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
"""
import json
import sys
import warnings
from dataclasses import dataclass, field

import torch
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


_SOLDER_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "bool": torch.bool}


@torch.library.custom_op("solder::call", mutates_args=())
def solder_call(program: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Runs `program` (.sol text headed by its outputs line) on `inputs`; returns its outputs (new tensors)."""
    device = inputs[0].device if inputs else torch.device("cpu")
    kernel = solder_compile(program, device="cuda" if device.type == "cuda" else "cpu")
    args = []
    for x, (_, _, dtype) in zip(inputs, kernel.inputs):
        want = _SOLDER_TORCH_DTYPES[dtype]
        x = (x if x.dtype == want else x.to(want)).contiguous()
        if x.is_cuda and x.data_ptr() % 16:  # a view at an odd offset: Solder's kernels need 16-byte alignment
            x = x.clone()
        args.append(x)
    outs = kernel.allocate_outputs(args[0] if args else torch.empty(0, device=device))
    kernel(*args, out=outs)
    return [o if o.dtype == dt else o.to(dt) for o, (_, dt) in zip(outs, _op_outputs(program))]


@solder_call.register_fake
def _solder_call_fake(program, inputs):
    device = inputs[0].device if inputs else torch.device("cpu")
    return [torch.empty(s, dtype=dt, device=device) for s, dt in _op_outputs(program)]


# ---- Partitioning --------------------------------------------------------------------------------

class _Support(OperatorSupport):
    def __init__(self, reasons):
        super().__init__()
        self.reasons = reasons

    def is_node_supported(self, submodules, node) -> bool:
        why = fx_translate.supported(node)
        if why is not None and node.op == "call_function":
            self.reasons[node.name] = why
        return why is None


_VIEWISH = fx_translate.VIEWS | {__import__("operator").getitem}
# One node that is a fused kernel's worth of work on its own (a partition of just it is kept).
_COMPOSITE = fx_translate.SDPA | {torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default,
                                  torch.ops.aten.native_layer_norm.default, torch.ops.aten.var_mean.correction}


@dataclass
class Explanation:
    partitions: list = field(default_factory=list)   # dicts: nodes, program (text), error
    fallback: dict = field(default_factory=dict)     # node name -> reason
    notes: list = field(default_factory=list)

    def format(self) -> str:
        lines = []
        translated = sum(len(p["nodes"]) for p in self.partitions if not p.get("error"))
        total = translated + len(self.fallback)
        lines.append(f"solder: {len(self.partitions)} partition(s), {translated} of {total} ATen nodes on Solder")
        for k, p in enumerate(self.partitions):
            state = f"fell back: {p['error']}" if p.get("error") else "Solder"
            lines.append(f"-- partition {k} ({len(p['nodes'])} nodes, {state}): {', '.join(p['nodes'])}")
            if p.get("program"):
                lines += ["   " + l for l in p["program"].rstrip().splitlines()]
        if self.fallback:
            lines.append("-- left to Inductor:")
            for name, why in self.fallback.items():
                lines.append(f"   {name}: {why}")
        lines += [f"-- {n}" for n in self.notes]
        return "\n".join(lines)


_last_explanations: list = []


def partition_and_replace(gm, explanation=None):
    """Replaces every translatable partition of the ATen graph `gm` by a call of solder::call. Returns
    the rewritten graph module (in place)."""
    explanation = explanation if explanation is not None else Explanation()
    gm.graph.eliminate_dead_code()  # unused results (SDPA's log-sum-exp) must not block a partition
    reasons = {}
    partitioner = CapabilityBasedPartitioner(gm, _Support(reasons), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for k, part in enumerate(partitions):
        nodes = sorted(part.nodes, key=order.get)
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
            if any(u not in members for u in n.users):
                outputs.append(n)
        try:
            program = fx_translate.translate(f"fx_partition_{k}", nodes, inputs, outputs)
            info["program"] = program.text
            kernel = solder_compile(program.text, device="cpu")  # verify now (the program, not the device)
            del kernel
        except (fx_translate.Unsupported, SolderError) as e:
            info["error"] = str(e).splitlines()[0]
            for n in nodes:
                explanation.fallback[n.name] = f"partition refused: {info['error']}"
            continue
        source = _op_source(program.text, [fx_translate._shape(n) for n in outputs], program.output_dtypes)
        last = nodes[-1]
        with gm.graph.inserting_after(last):
            call = gm.graph.call_function(torch.ops.solder.call.default, (source, list(inputs)))
            call.meta["val"] = [n.meta["val"] for n in outputs]
        for i, n in enumerate(outputs):
            with gm.graph.inserting_after(call):
                item = gm.graph.call_function(__import__("operator").getitem, (call, i))
                item.meta["val"] = n.meta["val"]
            n.replace_all_uses_with(item, delete_user_cb=lambda u: u not in members and u is not item)
    for name, why in reasons.items():
        explanation.fallback.setdefault(name, why)
    _legalize(gm)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return gm


def _legalize(gm):
    """Topological order again (a partition's call sits after its last node; users placed between its
    nodes move after it)."""
    from torch.fx.passes.tools_common import legalize_graph

    legalize_graph(gm)


# ---- The backend --------------------------------------------------------------------------------

_backward_warned = False


def _inner_compile(gm, example_inputs, **kwargs):
    from torch._inductor.compile_fx import compile_fx_inner

    global _backward_warned
    if kwargs.get("is_backward"):
        if not _backward_warned:
            warnings.warn("solder: a training graph — the backward runs on Inductor (Solder compiles forward graphs)")
            _backward_warned = True
        return compile_fx_inner(gm, example_inputs, **kwargs)
    explanation = Explanation()
    gm = partition_and_replace(gm, explanation)
    _last_explanations.append(explanation)
    return compile_fx_inner(gm, example_inputs, **kwargs)


def solder_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The torch.compile backend (``backend="solder"``)."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, inner_compile=_inner_compile)


def register():
    """Registers backend="solder" with torch._dynamo (idempotent)."""
    import torch._dynamo

    if "solder" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(name="solder")(solder_backend)


# ---- explain --------------------------------------------------------------------------------------

def explain(model, *inputs, file=None):
    """Compiles `model` with backend="solder" (inference, under torch.no_grad) and runs it once on
    `inputs`; prints each partition with its program and every node left to Inductor with the reason.
    Returns the list of Explanations (one per ATen graph)."""
    import torch._dynamo

    import torch._functorch.config
    import torch._inductor.config

    start = len(_last_explanations)
    torch._dynamo.reset()
    # No compile caches: a cached graph would skip the partitioner and leave nothing to explain.
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        torch.compile(model, backend=solder_backend)(*inputs)
    found = _last_explanations[start:]
    out = file or sys.stdout
    for k, e in enumerate(found):
        print(f"== graph {k}", file=out)
        print(e.format(), file=out)
    return found
