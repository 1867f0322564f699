"""ATen FX graph → Solder program (.sol text).

Every value of the graph is represented lazily, as a function from index expressions (one per
dimension of the value) to a .sol scalar expression. Views (view/reshape, permute, transpose, expand,
slice, select, unsqueeze, squeeze) and pointwise ops only compose these functions; reductions,
contractions, softmax, top-k and the partition's outputs become definitions (named targets), which
later nodes load. Solder's own fusion then decides the kernels.

``supported(node)`` says whether a node translates (and why not); ``translate(nodes, inputs, outputs)``
builds the program for a partition: a list of nodes closed under the order of the graph, the external
values it reads (its inputs) and the values other nodes read (its outputs).
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field

import torch

aten = torch.ops.aten

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32", torch.bool: "bool",
          torch.int64: "i32"}


FLOATS = ("f32", "f16", "bf16")


class Unsupported(Exception):
    """The node cannot be translated; the message says why (shown by solder.explain)."""


def _val(node):
    v = node.meta.get("val") if hasattr(node, "meta") else None
    if v is None:
        raise Unsupported(f"{node}: no shape information (meta['val'])")
    return v


def _shape(node):
    v = _val(node)
    if isinstance(v, (tuple, list)):
        raise Unsupported(f"{node}: a tuple value used as a tensor")
    shape = []
    for s in v.shape:
        if not isinstance(s, int):
            try:
                s = int(s)
            except Exception:
                raise Unsupported(f"{node}: dynamic shape {tuple(v.shape)} (Solder compiles for static sizes)")
        shape.append(s)
    return shape


def _dtype(node):
    dt = _val(node).dtype
    if dt not in DTYPES:
        raise Unsupported(f"{node}: dtype {dt} (Solder has f32, f16, bf16, i32, bool)")
    return DTYPES[dt]


def _num(x):
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x) if x >= 0 else f"({x})"
    x = float(x)
    if math.isnan(x):
        raise Unsupported("a NaN constant")
    if math.isinf(x):
        return "inf" if x > 0 else "(-inf)"
    text = repr(x)
    return text if x >= 0 else f"({text})"


def _norm_dim(d, rank):
    return d + rank if d < 0 else d


_TRIL_LOAD = re.compile(r"select\(\((?P<col>[^<>=!&|]+) <= (?P<row>[^<>=!&|]+)\), 1, 0\)")
_NEGATE = {"<=": ">", ">": "<=", "<": ">=", ">=": "<", "==": "!=", "!=": "=="}


def _comparison(text):
    """(lhs, op, rhs) when `text` is one parenthesised comparison `(a OP b)` of two operands holding
    no comparison or logical operator themselves, else None."""
    if not (text.startswith("(") and text.endswith(")")):
        return None
    depth = 0
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k != len(text) - 1:
            return None  # "(a) + (b)": the first parenthesis closes before the end
    inner = text[1:-1]
    found = re.findall(r" (<=|>=|==|!=|<|>) ", inner)
    if len(found) != 1 or "&&" in inner or "||" in inner:
        return None
    lhs, rhs = inner.split(f" {found[0]} ")
    if re.search(r"[<>=!]", lhs + rhs) or "select(" in lhs + rhs:
        return None
    return lhs, found[0], rhs


def _negated(text):
    """The negation of a condition that is one comparison (`(j > i)` gives `(j <= i)`), else None."""
    c = _comparison(text)
    return f"({c[0]} {_NEGATE[c[1]]} {c[2]})" if c else None


def tril_constant(t) -> bool:
    """Whether the tensor t holds torch.tril(torch.ones_like(t)): 1 where the column index is at most
    the row index (its last two dims), 0 elsewhere. Checked on the tensor's values (a buffer, read at
    compile time); the backend guards the call on the same tensor (torch_backend, "guards")."""
    if t.dim() < 2 or t.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.bool, torch.int32, torch.int64):
        return False
    if isinstance(t, torch._subclasses.FakeTensor) or t.device.type == "meta":
        return False  # no values to check
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():  # the backend compiles inside Inductor's fake mode
        return bool(torch.equal(t, torch.tril(torch.ones_like(t))))


# ---- The ops --------------------------------------------------------------------------------------

UNARY = {
    aten.exp.default: "exp({})", aten.log.default: "log({})", aten.tanh.default: "tanh({})",
    aten.sqrt.default: "sqrt({})", aten.rsqrt.default: "rsqrt({})", aten.abs.default: "abs({})",
    aten.sigmoid.default: "sigmoid({})", aten.silu.default: "silu({})", aten.neg.default: "(-({}))",
    aten.relu.default: "max({}, 0)", aten.reciprocal.default: "(1 / ({}))", aten.logical_not.default: "(({}) == 0)",
}
# Functions the .sol language gains on the "language" branch (issue 18 part 4): translated once the
# parser here accepts them (probed once per process), else left to Inductor with that reason.
OPTIONAL_UNARY = {aten.sin.default: "sin", aten.cos.default: "cos", aten.erf.default: "erf",
                  aten.exp2.default: "exp2", aten.log2.default: "log2", aten.floor.default: "floor"}
_language_cache = {}


def language_has(function):
    """Whether this build's .sol parser knows `function` (e.g. "sin")."""
    if function not in _language_cache:
        from . import _kernel

        text = f"program probe\ndim N = 2\nin x[N] : f32\nout y[n : N] : f32 = {function}(x[n])\n"
        try:
            _kernel._solder.NativeProgram.from_text(text, "<probe>")
            _language_cache[function] = True
        except Exception:
            _language_cache[function] = False
    return _language_cache[function]


BINARY = {
    aten.add.Tensor: "({} + {})", aten.add.Scalar: "({} + {})", aten.sub.Tensor: "({} - {})", aten.sub.Scalar: "({} - {})",
    aten.mul.Tensor: "({} * {})", aten.mul.Scalar: "({} * {})", aten.div.Tensor: "({} / {})", aten.div.Scalar: "({} / {})",
    aten.maximum.default: "max({}, {})", aten.minimum.default: "min({}, {})",
    aten.pow.Tensor_Scalar: "pow({}, {})", aten.pow.Tensor_Tensor: "pow({}, {})",
    aten.gt.Tensor: "({} > {})", aten.gt.Scalar: "({} > {})", aten.lt.Tensor: "({} < {})", aten.lt.Scalar: "({} < {})",
    aten.ge.Tensor: "({} >= {})", aten.ge.Scalar: "({} >= {})", aten.le.Tensor: "({} <= {})", aten.le.Scalar: "({} <= {})",
    aten.eq.Tensor: "({} == {})", aten.eq.Scalar: "({} == {})", aten.ne.Tensor: "({} != {})", aten.ne.Scalar: "({} != {})",
    aten.logical_and.default: "({} && {})", aten.logical_or.default: "({} || {})",
}
VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default, aten.t.default,
         aten.transpose.int, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
         aten.squeeze.default, aten.slice.Tensor, aten.select.int, aten.clone.default, aten.alias.default,
         aten.detach.default, aten.lift_fresh_copy.default}
REDUCTIONS = {aten.sum.dim_IntList: "sum", aten.amax.default: "max", aten.amin.default: "min", aten.mean.dim: "mean",
              aten.prod.dim_int: "prod"}
OTHERS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.where.self, aten.masked_fill.Scalar,
          aten.masked_fill.Tensor, aten.scalar_tensor.default, aten.full.default, aten.var.correction,
          aten.var_mean.correction, aten._softmax.default, aten._log_softmax.default, aten.topk.default,
          aten._to_copy.default, aten.gelu.default, aten.native_layer_norm.default,
          aten._scaled_dot_product_flash_attention_for_cpu.default, aten._scaled_dot_product_flash_attention.default,
          aten._scaled_dot_product_efficient_attention.default, aten._scaled_dot_product_cudnn_attention.default,
          aten.scaled_dot_product_attention.default, operator.getitem, aten.cat.default,
          aten.split.Tensor, aten.split_with_sizes.default, torch.ops.prims.convert_element_type.default,
          torch.ops.prims.iota.default, aten.arange.start_step, aten.any.dim, aten.any.dims, aten.all.dim}
MULTI_OUTPUT = {aten.var_mean.correction, aten.topk.default, aten.native_layer_norm.default,
                aten.split.Tensor, aten.split_with_sizes.default,
                aten._scaled_dot_product_flash_attention_for_cpu.default, aten._scaled_dot_product_flash_attention.default,
                aten._scaled_dot_product_efficient_attention.default, aten._scaled_dot_product_cudnn_attention.default}
SDPA = {aten._scaled_dot_product_flash_attention_for_cpu.default, aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_efficient_attention.default, aten._scaled_dot_product_cudnn_attention.default,
        aten.scaled_dot_product_attention.default}


def supported(node) -> str | None:
    """None when the node translates, else the reason it does not."""
    if node.op != "call_function":
        return f"{node.op} node"
    t = node.target
    if t in OPTIONAL_UNARY:
        if not language_has(OPTIONAL_UNARY[t]):
            return f"{OPTIONAL_UNARY[t]} is not in this build's .sol language yet"
    elif t not in UNARY and t not in BINARY and t not in VIEWS and t not in REDUCTIONS and t not in OTHERS:
        return f"no translation for {t}"
    try:
        if t is operator.getitem:
            src = node.args[0]
            if src.op != "call_function" or src.target not in MULTI_OUTPUT:
                return "getitem of a value that is not a translated multi-output op"
            if src.target in SDPA and node.args[1] != 0:
                return "only the attention output of SDPA translates (not its log-sum-exp)"
            if any(u.target is not operator.getitem for u in src.users):
                return f"{src.name} is used whole"
            if src.target in SDPA and any(u.args[1] != 0 for u in src.users):
                return f"{src.name}'s log-sum-exp is used, which does not translate"
            if src.target is aten.native_layer_norm.default and node.args[1] != 0:
                return "only layer_norm's output translates (not its mean/rstd)"
            _dtype(node), _shape(node)
            return None
        if t in MULTI_OUTPUT:
            for u in node.users:
                why = supported(u) if u.op == "call_function" and u.target is operator.getitem else "used whole"
                if why is not None:
                    return f"a result of {t} is read by {u.name}, which does not translate ({why})"
            for a in node.args:
                if hasattr(a, "meta"):
                    _dtype(a), _shape(a)
            if t in SDPA:
                _check_sdpa(node)
            if t is aten.topk.default:
                dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", -1)
                largest = node.args[3] if len(node.args) > 3 else node.kwargs.get("largest", True)
                if _norm_dim(dim, len(_shape(node.args[0]))) != len(_shape(node.args[0])) - 1 or not largest:
                    return "topk over a dim other than the last, or smallest"
            return None
        _dtype(node), _shape(node)
        for a in node.args:
            if hasattr(a, "meta") and hasattr(a, "op"):
                _dtype(a), _shape(a)
        if t is aten._to_copy.default and node.kwargs.get("device") not in (None, _val(node.args[0]).device):
            return "_to_copy between devices"
        if t in SDPA:
            _check_sdpa(node)
        if t is aten.gelu.default and node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none") != "tanh" \
                and not language_has("erf"):
            return "exact gelu needs erf, which this build's .sol language does not have yet (gelu(approximate='tanh') translates)"
    except Unsupported as e:
        return str(e)
    return None


def _check_sdpa(node):
    args = list(node.args) + [None] * 8
    t = node.target
    if t is aten._scaled_dot_product_flash_attention_for_cpu.default or t is aten._scaled_dot_product_flash_attention.default:
        dropout = args[3] if args[3] is not None else node.kwargs.get("dropout_p", 0.0)
    elif t is aten._scaled_dot_product_efficient_attention.default:
        dropout = args[5] if args[5] is not None else node.kwargs.get("dropout_p", 0.0)
    else:
        dropout = node.kwargs.get("dropout_p", 0.0)
    if dropout:
        raise Unsupported("SDPA with dropout")


# ---- The builder ----------------------------------------------------------------------------------

@dataclass
class Value:
    shape: list
    dtype: str
    load: object  # callable: list of index expression strings -> scalar expression string


@dataclass
class Program:
    name: str
    text: str
    inputs: list    # fx nodes, in program order
    outputs: list   # fx nodes read outside the partition (several may share one program output)
    output_dtypes: list = field(default_factory=list)  # torch dtypes of the program's outputs
    output_index: list = field(default_factory=list)   # per output node: the program output it reads
    guards: list = field(default_factory=list)   # (input position, "tril"): inputs read as index expressions
    # per output node: None, or (dim, start, end) when its program output stacks several outputs along
    # `dim` (`stack_outputs`): the node is that slice of it
    output_slices: list = field(default_factory=list)
    output_shapes: list = field(default_factory=list)  # torch shapes of the program's outputs


class Builder:
    def __init__(self, name):
        self.name = name
        self.dims = {}     # size -> dim name
        self.lines = []
        self.inputs = []
        self.input_shapes = []  # the declared shape of each input (size-1 dims left out)
        self.counter = 0

    def dim(self, size):
        if size not in self.dims:
            self.dims[size] = f"D{len(self.dims)}_{size}"
        return self.dims[size]

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def input(self, name, shape, dtype):
        """An input of the program. Dims of size 1 are left out of its declaration (the call passes the
        tensor reshaped to `declared`, a view): a [1, T, C] activation is the [T, C] matrix that the GEMM
        skeleton reads with TMA, where `x[0, t, c]` would keep it off the skeleton."""
        declared = [s for s in shape if s != 1] if any(s != 1 for s in shape) else list(shape)
        keep = [k for k, s in enumerate(shape) if s != 1] if len(declared) != len(shape) else list(range(len(shape)))
        dims = ", ".join(self.dim(s) for s in declared)
        self.inputs.append(f"in {name}[{dims}] : {dtype}" if declared else f"in {name} : {dtype}")
        self.input_shapes.append(declared)
        return Value(shape, dtype, (lambda idx, n=name, r=len(declared), keep=keep:
                                    f"{n}[{', '.join(idx[k] for k in keep)}]" if r else n))

    def tril_input(self, shape, dtype):
        """A graph input whose values are known to be tril(ones) (`tril_constant`): an index expression,
        1 where the column index is at most the row index, read from no tensor. Comparing it with 0
        (`bias == 0`, nanoGPT's mask) gives a comparison of indices (`_simplify_tril_compare`), which
        Solder's tile-skipping and attention paths take as a causal mask."""
        return Value(list(shape), dtype, lambda idx: f"select(({idx[-1]} <= {idx[-2]}), 1, 0)")

    def define(self, shape, dtype, body, reduce=None, out=False, name=None):
        """A definition target[i0, ...] = [R(r...)] body(i..., r...). `reduce` = (op, [sizes]); `body`
        takes the p-index names and the r-index names."""
        name = name or self.fresh("t")
        # Positional index names (i0, i1, ... and r0, ...): the same value reads the same in every
        # definition, which Solder's online-softmax rule compares (max(r0) V and sum(r0) exp(V - m)).
        # Dims of size 1 are left out of the declaration (the body reads them at 0, loads skip them): a
        # softmax's row max over [1, H, T, S] is m[h, i], read as the scores' s[h, i, j] are, which the
        # online-softmax rule compares; the call views an output back to its torch shape.
        keep = [k for k, s in enumerate(shape) if s != 1]
        if not keep:
            keep = list(range(len(shape)))
        names = {k: f"i{j}" for j, k in enumerate(keep)}
        decl = ", ".join(f"{names[k]} : {self.dim(shape[k])}" for k in keep)
        p = ["0" if shape[k] == 1 else names[k] for k in range(len(shape))]  # the body reads dims of size 1 at 0
        prefix = "out " if out else ""
        if reduce:
            op, sizes = reduce
            r = [f"r{k}" for k in range(len(sizes))]
            rdecl = ", ".join(f"{v} : {self.dim(s)}" for v, s in zip(r, sizes))
            rhs = f"{op}({rdecl}) {body(p, r)}"
        else:
            rhs = body(p, [])
        self.lines.append(f"{prefix}{name}[{decl}] : {dtype} = {rhs}")  # 0-d: name[]
        return Value(list(shape), dtype, (lambda idx, n=name, keep=keep: f"{n}[{', '.join(idx[k] for k in keep)}]" if idx else n))

    def output_from_definition(self, load, shape, dtype, name):
        """When the output reads a reduction's definition whole (`t4[i0, i1, i2, i3]`, same shape) and
        nothing else reads that definition, the definition itself becomes the output (moved to the end,
        renamed, at the output's dtype: a reduction accumulates in f32 whatever its target's dtype, so
        the value is the same). Solder's attention skeleton stores the attention's result itself; an
        output that copies it would keep the attention off it. Returns whether it did."""
        m = re.fullmatch(r"(t\d+)\[(.*)\]", load)
        real = [k for k, s in enumerate(shape) if s != 1]  # dims of size 1: the call views the output
        if m is None or not real or [x.strip() for x in m.group(2).split(",")] != [f"i{d}" for d in real]:
            return False
        target = m.group(1)
        pos = [k for k, l in enumerate(self.lines) if l.startswith(f"{target}[")]
        if len(pos) != 1 or any(re.search(rf"\b{target}\[", l) for k, l in enumerate(self.lines) if k != pos[0]):
            return False
        line = self.lines[pos[0]]
        decl = ", ".join(f"i{k} : {self.dim(shape[d])}" for k, d in enumerate(real))
        head = f"{target}[{decl}] : "
        if not line.startswith(head):
            return False
        rhs = line[len(head):].split(" = ", 1)
        if len(rhs) != 2 or rhs[0] not in FLOATS or dtype not in FLOATS or not re.match(r"(sum|max|min)\(", rhs[1]):
            return False
        del self.lines[pos[0]]
        self.lines.append(f"out {name}[{decl}] : {dtype} = {rhs[1]}")
        return True

    def text(self):
        dims = ", ".join(f"{n} = {s}" for s, n in self.dims.items())
        head = [f"program {self.name}"] + ([f"dim {dims}"] if dims else [])
        return "\n".join(head + self.inputs + self.lines) + "\n"


def _broadcast(v: Value, shape):
    """v read at the index of a value of `shape` (numpy broadcasting)."""
    offset = len(shape) - len(v.shape)

    def load(idx):
        sub = [("0" if s == 1 and shape[offset + k] != 1 else idx[offset + k]) for k, s in enumerate(v.shape)]
        return v.load(sub)
    return load


class FlatIndex(str):
    """The text of a flat index (i0 * s1 + i1 ...) that remembers its parts and sizes: unflattening it
    to the same sizes gives the parts back, so a merge of dims followed by a split (bmm's batch dim
    between two 4-D views) leaves no // and % in the program."""

    def __new__(cls, text, parts, sizes):
        obj = str.__new__(cls, text)
        obj.parts, obj.sizes = list(parts), list(sizes)
        return obj


def _flat_index(idx, shape):
    expr = None
    for i, s in zip(idx, shape):
        expr = i if expr is None else f"({expr}) * {s} + {i}"
    real = [i for i, s in zip(idx, shape) if s != 1]
    if len(real) <= 1:  # the dims of size 1 contribute 0
        return real[0] if real else "0"
    return FlatIndex(expr, ["0" if s == 1 else i for i, s in zip(idx, shape)], shape)


def _reshape_groups(xshape, yshape):
    """Pairs of dim ranges ((xa, xb), (ya, yb)) of equal products that partition both shapes, or None."""
    groups, i, j = [], 0, 0
    while i < len(xshape) or j < len(yshape):
        xa, ya = i, j
        px = xshape[i] if i < len(xshape) else 1
        py = yshape[j] if j < len(yshape) else 1
        i, j = i + 1, j + 1
        while px != py:
            if px < py:
                if i >= len(xshape):
                    return None
                px *= xshape[i]
                i += 1
            else:
                if j >= len(yshape):
                    return None
                py *= yshape[j]
                j += 1
        groups.append(((xa, min(i, len(xshape))), (ya, min(j, len(yshape)))))
    return groups


def _unflatten(flat, shape):
    if len([s for s in shape if s != 1]) == 1:  # one real dim: the flat index is its index
        return [flat if s != 1 else "0" for s in shape]
    if isinstance(flat, FlatIndex):
        if list(flat.sizes) == list(shape):
            return list(flat.parts)
        real = [(i, s) for i, s in zip(flat.parts, flat.sizes) if s != 1]
        if [s for _, s in real] == [s for s in shape if s != 1]:
            it = iter(i for i, _ in real)
            return ["0" if s == 1 else next(it) for s in shape]
    out, stride = [], 1
    strides = []
    for s in reversed(shape):
        strides.append(stride)
        stride *= s
    strides.reverse()
    for k, (s, st) in enumerate(zip(shape, strides)):
        e = f"({flat}) // {st}" if st != 1 else f"({flat})"
        out.append(e if k == 0 else f"({e}) % {s}")
    return out


def _select(cond, a, b):
    """select(cond, a, b); when a is -inf and cond one comparison, select(not cond, b, -inf): the form
    select(C, S, -inf) in which Solder recognises a mask (masked_fill(x, j > i, -inf) is
    select(j <= i, x, -inf)). Both mean the same for every value of the operands."""
    if a.strip() in ("(-inf)", "-inf") and b.strip() not in ("(-inf)", "-inf"):
        neg = _negated(cond)
        if neg is not None:
            return f"select({neg}, {b}, {a})"
    return f"select({cond}, {a}, {b})"


def _simplify_tril_compare(load, rank, is_eq):
    """For a value that reads a tril constant (`select((j <= i), 1, 0)` at every index), `value == 0`
    as `(j > i)` and `value != 0` as `(j <= i)`; None for any other value."""
    def cond(idx):
        text = load(idx)
        m = _TRIL_LOAD.fullmatch(text)
        if m is None:
            return None
        return f"({m['col']} > {m['row']})" if is_eq else f"({m['col']} <= {m['row']})"
    probe = cond([f"_i{k}_" for k in range(rank)])
    return cond if probe is not None else None


class Translator:
    def __init__(self, name):
        self.b = Builder(name)
        self.values = {}  # fx node -> Value or tuple of Values
        self.stored_operands = {}  # (shape, dtype, text) -> the definition storing a GEMM operand
        self.folded = set()  # mul nodes whose constant factor a bmm's definition already applies
        self.members = set()  # the partition's nodes

    def operand(self, a, shape=None):
        if hasattr(a, "op"):
            v = self.values[a]
            return _broadcast(v, shape) if shape is not None else v.load
        return lambda idx, c=a: _num(c)

    def condition(self, a, shape):
        """Operand `a` as a condition (what select, && and || take): bool values are conditions;
        numbers and constants compare with 0."""
        if hasattr(a, "op"):
            f = self.operand(a, shape)
            if _dtype(a) == "bool":
                return f
            return lambda idx: f"(({f(idx)}) != 0)"
        return lambda idx: "(1 == 1)" if a else "(0 == 1)"

    def materialize(self, v: Value, dtype=None):
        return self.b.define(v.shape, dtype or v.dtype, lambda p, r: v.load(p))

    def run(self, node):
        t = node.target
        args = node.args
        if t is operator.getitem:
            return self.values[args[0]][args[1]]
        shape = _shape(node) if t not in MULTI_OUTPUT else None
        dtype = _dtype(node) if t not in MULTI_OUTPUT else None
        if t in UNARY:
            f = self.operand(args[0], shape)
            return Value(shape, dtype, lambda idx: UNARY[t].format(f(idx)))
        if t in OPTIONAL_UNARY:
            f = self.operand(args[0], shape)
            return Value(shape, dtype, lambda idx: f"{OPTIONAL_UNARY[t]}({f(idx)})")
        if t in (aten.logical_and.default, aten.logical_or.default):
            # `&&` and `||` take conditions: a bool value is one; a number or a constant becomes `x != 0`.
            a, b = (self.condition(x, shape) for x in args[:2])
            return Value(shape, dtype, lambda idx: BINARY[t].format(a(idx), b(idx)))
        if t in (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar) and node in self.folded:
            return Value(shape, dtype, self.operand(args[0], shape))  # the bmm's definition applies the factor
        if t in (aten.eq.Scalar, aten.ne.Scalar) and args[1] == 0 and hasattr(args[0], "op"):
            cond = _simplify_tril_compare(self.operand(args[0], shape), len(shape), t is aten.eq.Scalar)
            if cond is not None:
                return Value(shape, dtype, cond)
        if t in BINARY:
            a, b = self.operand(args[0], shape), self.operand(args[1], shape)
            alpha = node.kwargs.get("alpha", args[2] if len(args) > 2 else 1)
            if alpha != 1:
                b0 = b
                b = lambda idx: f"({_num(alpha)} * {b0(idx)})"
            fmt = BINARY[t]
            if t in (aten.div.Tensor, aten.div.Scalar) and dtype != "i32":
                pass
            return Value(shape, dtype, lambda idx: fmt.format(a(idx), b(idx)))
        if t is aten.gelu.default:
            f = self.operand(args[0], shape)
            approx = node.kwargs.get("approximate", args[1] if len(args) > 1 else "none")
            if approx == "tanh":
                return Value(shape, dtype, lambda idx: f"gelu({f(idx)})")
            return Value(shape, dtype, lambda idx: f"(0.5 * {f(idx)} * (1 + erf({f(idx)} * 0.7071067811865476)))")
        if t in (aten.scalar_tensor.default, aten.full.default):
            c = args[0] if t is aten.scalar_tensor.default else args[1]
            if dtype == "bool":  # a condition, so that select and && take it
                return Value(shape, dtype, lambda idx: "(1 == 1)" if c else "(0 == 1)")
            return Value(shape, dtype, lambda idx: _num(c))
        if t is aten.where.self:
            c = self.condition(args[0], shape)
            a, b = (self.operand(x, shape) for x in args[1:3])
            return Value(shape, dtype, lambda idx: _select(c(idx), a(idx), b(idx)))
        if t in (aten.masked_fill.Scalar, aten.masked_fill.Tensor):
            x, m, v = self.operand(args[0], shape), self.condition(args[1], shape), self.operand(args[2], shape if hasattr(args[2], "op") else None)
            if hasattr(args[2], "op"):
                v = _broadcast(self.values[args[2]], shape)
            return Value(shape, dtype, lambda idx: _select(m(idx), v(idx), x(idx)))
        if t in (aten._to_copy.default, torch.ops.prims.convert_element_type.default):
            f = self.operand(args[0], shape)
            if dtype == "bool":  # torch's conversion to bool is `x != 0`
                return Value(shape, dtype, lambda idx: f"(({f(idx)}) != 0)")
            if hasattr(args[0], "op") and _dtype(args[0]) == "bool":  # a condition as a number: 0 or 1
                return Value(shape, dtype, lambda idx: f"select({f(idx)}, 1, 0)")
            if dtype in FLOATS and hasattr(args[0], "op") and _dtype(args[0]) in FLOATS:
                # Between floating dtypes inside a partition the value stays in f32, as Inductor keeps
                # it (emulate_precision_casts off): no rounding between two of the partition's
                # operations, only where a value leaves it (its outputs have the graph's dtypes).
                return Value(shape, dtype, f)
            return Value(shape, dtype, lambda idx: f"cast({f(idx)}, {dtype})")
        if t is torch.ops.prims.iota.default:
            start, step = node.kwargs.get("start", 0), node.kwargs.get("step", 1)
            return Value(shape, dtype, lambda idx: f"({_num(start)} + {_num(step)} * {idx[0]})")
        if t is aten.arange.start_step:
            start, step = args[0], args[2] if len(args) > 2 else node.kwargs.get("step", 1)
            return Value(shape, dtype, lambda idx: f"({_num(start)} + {_num(step)} * {idx[0]})")
        if t is aten.cat.default:
            return self.cat(node, shape, dtype)
        if t in (aten.split.Tensor, aten.split_with_sizes.default):
            return self.split(node)
        if t in VIEWS:
            return self.view(node, shape, dtype)
        if t in REDUCTIONS:
            x = self.values[args[0]]
            dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x.shape)))
            if isinstance(dims, int):
                dims = [dims]
            keep = args[2] if len(args) > 2 else node.kwargs.get("keepdim", False)
            return self.reduce(REDUCTIONS[t], x, dims, keep, dtype)
        if t in (aten.any.dim, aten.any.dims, aten.all.dim):
            # any: the max over the dims of (x != 0) is 1; all: the min is 1.
            x = self.values[args[0]]
            dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x.shape)))
            dims = [dims] if isinstance(dims, int) else list(dims)
            keep = args[2] if len(args) > 2 else node.kwargs.get("keepdim", False)
            c = self.condition(args[0], x.shape)
            flag = Value(x.shape, "f32", lambda idx: f"select({c(idx)}, 1, 0)")
            red = self.reduce("min" if t is aten.all.dim else "max", flag, dims, keep, "f32")
            return Value(red.shape, "bool", lambda idx: f"({red.load(idx)} > 0)")
        if t in (aten.var.correction, aten.var_mean.correction):
            x = self.values[args[0]]
            dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x.shape)))
            correction = node.kwargs.get("correction", 1)
            keep = node.kwargs.get("keepdim", False)
            var, mean = self.variance(x, dims, correction, keep, _dtype_of_val(_val(node)))
            return (var, mean) if t is aten.var_mean.correction else var
        if t in (aten.mm.default, aten.bmm.default, aten.addmm.default):
            return self.matmul(node, shape, dtype)
        if t in (aten._softmax.default, aten._log_softmax.default):
            x = self.values[args[0]]
            return self.softmax(x, _norm_dim(args[1], len(x.shape)), dtype, log=t is aten._log_softmax.default)
        if t is aten.topk.default:
            return self.topk(node)
        if t is aten.native_layer_norm.default:
            return self.layer_norm(node)
        if t in SDPA:
            return self.sdpa(node)
        raise Unsupported(f"no translation for {t}")

    # -- views --
    def view(self, node, shape, dtype):
        t, args = node.target, node.args
        x = self.values[args[0]]
        if t in (aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default):
            return x
        if t in (aten.view.default, aten._unsafe_view.default, aten.reshape.default):
            if list(shape) == list(x.shape):
                return x
            # Dims of size 1 added or removed only: map directly.
            xs = [s for s in x.shape if s != 1]
            ys = [s for s in shape if s != 1]
            if xs == ys:
                ypos = [k for k, s in enumerate(shape) if s != 1]

                def load(idx, ypos=ypos):
                    it = iter(idx[k] for k in ypos)
                    return x.load([("0" if s == 1 else next(it)) for s in x.shape])
                return Value(shape, dtype, load)
            groups = _reshape_groups(x.shape, shape)
            if groups is None:
                return Value(shape, dtype, lambda idx: x.load(_unflatten(_flat_index(idx, shape), x.shape)))

            def load(idx, groups=groups):
                j = []
                for (xa, xb), (ya, yb) in groups:
                    flat = _flat_index(idx[ya:yb], shape[ya:yb])
                    j += _unflatten(flat, x.shape[xa:xb]) if xb - xa > 1 else [flat]
                return x.load(j)
            return Value(shape, dtype, load)
        if t is aten.permute.default:
            perm = [_norm_dim(d, len(x.shape)) for d in args[1]]
            inv = [perm.index(k) for k in range(len(perm))]
            return Value(shape, dtype, lambda idx: x.load([idx[inv[k]] for k in range(len(perm))]))
        if t in (aten.t.default, aten.transpose.int):
            r = len(x.shape)
            d0, d1 = (0, 1) if t is aten.t.default else (_norm_dim(args[1], r), _norm_dim(args[2], r))
            if r < 2:
                return x

            def load(idx):
                j = list(idx)
                j[d0], j[d1] = j[d1], j[d0]
                return x.load(j)
            return Value(shape, dtype, load)
        if t is aten.expand.default:
            return Value(shape, dtype, _broadcast(x, shape))
        if t is aten.unsqueeze.default:
            d = _norm_dim(args[1], len(shape))
            return Value(shape, dtype, lambda idx: x.load(idx[:d] + idx[d + 1:]))
        if t in (aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default):
            keep = [k for k, s in enumerate(x.shape) if s != 1] if t is aten.squeeze.default else None
            if keep is None:
                ds = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
                ds = {_norm_dim(d, len(x.shape)) for d in ds}
                keep = [k for k in range(len(x.shape)) if not (k in ds and x.shape[k] == 1)]

            def load(idx):
                j, it = [], iter(idx)
                for k in range(len(x.shape)):
                    j.append(next(it) if k in keep else "0")
                return x.load(j)
            return Value(shape, dtype, load)
        if t is aten.slice.Tensor:
            d = _norm_dim(args[1] if len(args) > 1 else 0, len(x.shape))
            start = args[2] if len(args) > 2 and args[2] is not None else 0
            step = args[4] if len(args) > 4 else 1
            start = max(0, start + x.shape[d]) if start < 0 else min(start, x.shape[d])

            def load(idx):
                j = list(idx)
                j[d] = f"{start} + {step} * {idx[d]}" if step != 1 else (f"{idx[d]} + {start}" if start else idx[d])
                return x.load(j)
            return Value(shape, dtype, load)
        if t is aten.select.int:
            d = _norm_dim(args[1], len(x.shape))
            i = args[2] + x.shape[d] if args[2] < 0 else args[2]
            return Value(shape, dtype, lambda idx: x.load(list(idx[:d]) + [str(i)] + list(idx[d:])))
        raise Unsupported(f"view {t}")

    def cat(self, node, shape, dtype):
        parts = [self.values[a] for a in node.args[0]]
        d = _norm_dim(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0), len(shape))
        parts = [p for p in parts if not (len(p.shape) == 1 and p.shape[0] == 0)]

        def load(idx):
            # select(i < end0, part0[i], select(i < end1, part1[i - end0], ...)): each load is guarded.
            offsets, end = [], 0
            for p in parts:
                offsets.append(end)
                end += p.shape[d]
            expr = None
            for p, off in reversed(list(zip(parts, offsets))):
                j = list(idx)
                j[d] = f"{idx[d]} - {off}" if off else idx[d]
                here = p.load(j)
                expr = here if expr is None else f"select({idx[d]} < {off + p.shape[d]}, {here}, {expr})"
            return expr
        return Value(shape, dtype, load)

    def split(self, node):
        x = self.values[node.args[0]]
        d = _norm_dim(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0), len(x.shape))
        sizes = node.args[1]
        if isinstance(sizes, int):
            sizes = [min(sizes, x.shape[d] - k) for k in range(0, x.shape[d], sizes)]
        out, start = [], 0
        for size in sizes:
            def load(idx, start=start):
                j = list(idx)
                j[d] = f"{idx[d]} + {start}" if start else idx[d]
                return x.load(j)
            shape = list(x.shape)
            shape[d] = size
            out.append(Value(shape, x.dtype, load))
            start += size
        return tuple(out)

    # -- reductions --
    def reduce(self, op, x, dims, keep, dtype):
        r = len(x.shape)
        dims = sorted(_norm_dim(d, r) for d in dims)
        pdims = [k for k in range(r) if k not in dims]
        n = 1
        for d in dims:
            n *= x.shape[d]
        sol_op = "sum" if op == "mean" else op

        def body(p, rr):
            full, ip, ir = [], iter(p), iter(rr)
            for k in range(r):
                full.append(next(ir) if k in dims else next(ip))
            e = x.load(full)
            return f"({e}) / {n}" if op == "mean" else e
        acc = "f32" if dtype in ("f16", "bf16") else dtype
        red = self.b.define([x.shape[k] for k in pdims], acc, body, reduce=(sol_op, [x.shape[d] for d in dims]))
        return self._keepdim(red, r, dims, keep, dtype)

    def _keepdim(self, red, r, dims, keep, dtype):
        if not keep:
            return Value(red.shape, dtype, red.load)
        shape = [1 if k in dims else None for k in range(r)]
        it = iter(red.shape)
        shape = [1 if s == 1 else next(it) for s in shape]
        return Value(shape, dtype, lambda idx: red.load([i for k, i in enumerate(idx) if k not in dims]))

    def variance(self, x, dims, correction, keep, dtype):
        r = len(x.shape)
        dims = sorted(_norm_dim(d, r) for d in dims)
        n = 1
        for d in dims:
            n *= x.shape[d]
        mean = self.reduce("mean", x, dims, True, "f32")

        def dev(idx):
            return f"({x.load(idx)} - {mean.load(idx)})"
        sq = Value(x.shape, "f32", lambda idx: f"{dev(idx)} * {dev(idx)}")
        s = self.reduce("sum", sq, dims, keep, "f32")
        var = Value(s.shape, dtype, lambda idx: f"({s.load(idx)}) / {max(n - correction, 0)}")
        m = mean if keep else Value([x.shape[k] for k in range(r) if k not in dims], dtype,
                                    lambda idx: mean.load(self._reinsert(idx, r, dims)))
        return var, m

    @staticmethod
    def _reinsert(idx, r, dims):
        it = iter(idx)
        return ["0" if k in dims else next(it) for k in range(r)]

    def softmax(self, x, d, dtype, log=False):
        m = self.reduce("max", x, [d], True, "f32")
        e = Value(x.shape, "f32", lambda idx: f"exp({x.load(idx)} - {m.load(idx)})")
        z = self.reduce("sum", e, [d], True, "f32")
        if log:
            return Value(x.shape, dtype, lambda idx: f"({x.load(idx)} - {m.load(idx)} - log({z.load(idx)}))")
        return Value(x.shape, dtype, lambda idx: f"({e.load(idx)} / {z.load(idx)})")

    # -- contractions --
    def stored(self, v: Value) -> Value:
        """v itself when plain, else a definition that stores it (one per value: two GEMMs reading the
        same RMSNorm read one stored tensor)."""
        if self.plain(v):
            return v
        key = (tuple(v.shape), v.dtype, v.load(["_p0_", "_p1_"]))
        if key not in self.stored_operands:
            self.stored_operands[key] = self.materialize(v)
        return self.stored_operands[key]

    @staticmethod
    def plain(v: Value) -> bool:
        """Whether the 2-D value v is a stored matrix read as it is or transposed (`x3[i1, r0]`,
        `w[r0, i1]`, after dims of size 1 read at 0): what the GEMM skeleton's TMA loads take."""
        return re.fullmatch(r"\w+\[(0, )*(_p0_, _p1_|_p1_, _p0_)\]", v.load(["_p0_", "_p1_"])) is not None

    def matmul(self, node, shape, dtype):
        t, args = node.target, node.args
        a, b = (self.values[args[1]], self.values[args[2]]) if t is aten.addmm.default else (self.values[args[0]], self.values[args[1]])
        k = a.shape[-1]
        acc = "f32"
        if t is not aten.bmm.default and whole_gemm_candidate(shape[0], shape[1], k):
            # A GEMM the size of a linear layer (mm/addmm, M and N ≥ 64, K ≥ 256): its operands are
            # stored tensors at the graph's dtype, as they are for cuBLAS (AOTAutograd's cast before
            # the mm rounds them), so that Solder can run it whole on the sm_90a GEMM skeleton (TMA
            # reads stored operands) instead of recomputing a computed operand (RMSNorm, SiLU·up) per
            # tile in a fused kernel. An mm's result has the graph's dtype too (cuBLAS rounds it).
            a, b = self.stored(a), self.stored(b)
            if t is aten.mm.default:
                acc = dtype
        lead = self._bmm_lead(node, shape) if t is aten.bmm.default else None
        if lead:
            # The batch dim is a merge of dims (B·H of attention): define the product over them, so that
            # the 4-D views around it read c[b, h, i, j] and Solder sees attention's index structure.
            n = len(lead)
            factor = self._constant_factor(node)
            times = f" * {_num(factor)}" if factor is not None else ""

            def body(p, r):
                fi = _flat_index(p[:n], lead)
                return f"{a.load([fi, p[n], r[0]])} * {b.load([fi, r[0], p[n + 1]])}{times}"
            c = self.b.define(lead + list(shape[1:]), acc, body, reduce=("sum", [k]))
            return Value(shape, dtype, lambda idx: c.load(_unflatten(idx[0], lead) + list(idx[1:])))
        if t is aten.bmm.default:
            factor = self._constant_factor(node)
            times = f" * {_num(factor)}" if factor is not None else ""
            body = lambda p, r: f"{a.load([p[0], p[1], r[0]])} * {b.load([p[0], r[0], p[2]])}{times}"
        else:
            body = lambda p, r: f"{a.load([p[0], r[0]])} * {b.load([r[0], p[1]])}"
        c = self.b.define(shape, acc, body, reduce=("sum", [k]))
        if t is aten.addmm.default:
            bias = _broadcast(self.values[args[0]], shape)
            beta = node.kwargs.get("beta", 1)
            alpha = node.kwargs.get("alpha", 1)
            return Value(shape, dtype, lambda idx: f"({_num(beta)} * {bias(idx)} + {_num(alpha)} * {c.load(idx)})")
        return Value(shape, dtype, c.load)

    def _constant_factor(self, node):
        """The product c of the constants that scale a bmm's result along its chain of single uses in the
        partition (views, float-to-float conversions, `* c`, `/ c`): attention's `(q @ k^T) * scale`, or
        Inductor's softmax form `(s * 1 - max) * scale` once `_softmax_scale_back` (torch_backend) put the
        scale before the max. The bmm's definition then applies c inside the sum (`sum(d) q * k * c`, the
        score form the attention paths take: a mask select(C, S, -inf) must read the score S itself), and
        each scaling node reads its operand unchanged (`self.folded`). None when there is no scaling."""
        reshapes = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
        converts = (torch.ops.prims.convert_element_type.default, aten._to_copy.default)
        scalings = (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar)
        x, factor, found = node, 1.0, []
        while True:
            users = list(x.users)
            if len(users) != 1 or users[0] not in self.members or users[0].op != "call_function":
                break
            u = users[0]
            if u.target in reshapes and u.args[0] is x:
                x = u
                continue
            if u.target in converts and u.args[0] is x and _dtype(u) in FLOATS and _dtype(x) in FLOATS:
                x = u
                continue
            if u.target in scalings and u.args[0] is x and len(u.args) == 2:
                c = u.args[1]
                if isinstance(c, bool) or not isinstance(c, (int, float)) or _dtype(u) not in FLOATS or not math.isfinite(float(c)):
                    break
                if u.target in (aten.div.Tensor, aten.div.Scalar):
                    if c == 0:
                        break
                    c = 1.0 / c
                factor *= c
                found.append(u)
                x = u
                continue
            break
        if not found:
            return None
        self.folded |= set(found)
        return factor

    @staticmethod
    def _bmm_lead(node, shape):
        """The dims that bmm's batch dim merges: from a view of its result (all of them the same), else
        from the view that made its first operand; None when neither shows more than one dim."""
        batch = shape[0]
        reshapes = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)

        def ok(lead):
            # more than one dim of size > 1: a lead of [1, H] (batch 1) is the bmm's own batch dim
            return len([s for s in lead if s != 1]) > 1 and math.prod(lead) == batch
        users = list(node.users)
        if users and all(u.op == "call_function" and u.target in reshapes for u in users):
            leads = {tuple(_shape(u)[:-2]) for u in users if _shape(u)[-2:] == list(shape[1:])}
            if len(leads) == 1 and ok(list(next(iter(leads)))):
                return list(next(iter(leads)))
        a = node.args[0]
        if hasattr(a, "op") and a.op == "call_function" and a.target in reshapes and hasattr(a.args[0], "meta"):
            src = _shape(a.args[0])
            if src[-2:] == _shape(a)[-2:] and ok(src[:-2]):
                return src[:-2]
        return None

    def topk(self, node):
        x = self.values[node.args[0]]
        k = node.args[1]
        r = len(x.shape)
        vals_shape = list(x.shape[:-1]) + [k]
        name_v, name_i = self.b.fresh("tv"), self.b.fresh("ti")
        p = [self.b.fresh("ix") for _ in range(r)]
        e = self.b.fresh("rx")
        decl = ", ".join(f"{v} : {self.b.dim(s)}" for v, s in zip(p[:-1], x.shape[:-1]))
        target_v = f"{name_v}[{decl + ', ' if decl else ''}{p[-1]}]"
        target_i = f"{name_i}[{decl + ', ' if decl else ''}{p[-1]}] : i32"
        body = x.load(p[:-1] + [e])
        self.b.lines.append(f"{target_v} : {x.dtype}, {target_i} = topk({k}, {e} : {self.b.dim(x.shape[-1])}) {body}")
        vals = Value(vals_shape, x.dtype, lambda idx, n=name_v: f"{n}[{', '.join(idx)}]")
        inds = Value(vals_shape, "i32", lambda idx, n=name_i: f"{n}[{', '.join(idx)}]")
        return (vals, inds)

    def layer_norm(self, node):
        x = self.values[node.args[0]]
        nshape = node.args[1]
        w = node.args[2] if len(node.args) > 2 else None
        bias = node.args[3] if len(node.args) > 3 else None
        eps = node.args[4] if len(node.args) > 4 else 1e-5
        r = len(x.shape)
        dims = list(range(r - len(nshape), r))
        var, mean = self.variance(x, dims, 0, True, "f32")
        wl = _broadcast(self.values[w], x.shape) if w is not None else (lambda idx: "1")
        bl = _broadcast(self.values[bias], x.shape) if bias is not None else (lambda idx: "0")
        out = Value(x.shape, _dtype_of_val(_val(node)[0]),
                    lambda idx: f"(({x.load(idx)} - {mean.load(idx)}) * rsqrt({var.load(idx)} + {_num(eps)}) * {wl(idx)} + {bl(idx)})")
        return (out, None, None)

    def sdpa(self, node):
        t, args = node.target, list(node.args)
        q, k, v = (self.values[a] for a in args[:3])
        kw = node.kwargs
        mask, causal, scale = None, False, kw.get("scale")
        if t in (aten._scaled_dot_product_flash_attention_for_cpu.default, aten._scaled_dot_product_flash_attention.default):
            causal = args[4] if len(args) > 4 else kw.get("is_causal", False)
            mask = kw.get("attn_mask")
        elif t is aten._scaled_dot_product_efficient_attention.default:
            mask = args[3] if len(args) > 3 else kw.get("attn_bias")
            causal = args[6] if len(args) > 6 else kw.get("is_causal", False)
            scale = args[7] if len(args) > 7 else scale
        elif t is aten._scaled_dot_product_cudnn_attention.default:
            mask = args[3] if len(args) > 3 else kw.get("attn_bias")
            causal = args[6] if len(args) > 6 else kw.get("is_causal", False)
            scale = args[8] if len(args) > 8 else scale
        else:
            mask = args[3] if len(args) > 3 else kw.get("attn_mask")
            causal = args[5] if len(args) > 5 else kw.get("is_causal", False)
            scale = args[6] if len(args) > 6 else scale
        d = q.shape[-1]
        scale = scale if scale is not None else 1.0 / math.sqrt(d)
        lead = list(q.shape[:-2])
        L, S = q.shape[-2], k.shape[-2]
        sshape = lead + [L, S]
        kl = _broadcast(k, lead + [S, d])
        vl = _broadcast(v, lead + [S, v.shape[-1]])
        s = self.b.define(sshape, "f32", lambda p, r: f"{q.load(p[:-1] + [r[0]])} * {kl(p[:-2] + [p[-1], r[0]])} * {_num(scale)}",
                          reduce=("sum", [d]))
        sv = s
        if mask is not None:
            mv = self.values[mask]
            ml = _broadcast(mv, sshape)
            if mv.dtype == "bool":
                sv = Value(sshape, "f32", lambda idx: f"select({ml(idx)}, {s.load(idx)}, -inf)")
            else:
                sv = Value(sshape, "f32", lambda idx: f"({s.load(idx)} + {ml(idx)})")
        if causal:
            prev = sv
            # is_causal is aligned top-left, as torch defines it: key j <= query i
            sv = Value(sshape, "f32", lambda idx: f"select({idx[-1]} <= {idx[-2]}, {prev.load(idx)}, -inf)")
        m = self.reduce("max", sv, [len(sshape) - 1], True, "f32")
        e = Value(sshape, "f32", lambda idx: f"exp({sv.load(idx)} - {m.load(idx)})")
        z = self.reduce("sum", e, [len(sshape) - 1], True, "f32")
        oshape = lead + [L, v.shape[-1]]
        out_dtype = q.dtype
        o = self.b.define(oshape, "f32", lambda p, r: f"{e.load(p[:-1] + [r[0]])} / {z.load(p[:-1] + ['0'])} * {vl(p[:-2] + [r[0], p[-1]])}",
                          reduce=("sum", [S]))
        return (Value(oshape, out_dtype, o.load), None, None, None)


WHOLE_GEMM_MIN_MN, WHOLE_GEMM_MIN_K = 64, 256


def whole_gemm_candidate(m, n, k) -> bool:
    """An mm/addmm large enough for the GEMM skeleton (fusion/whole_contractions.h takes M, N ≥ 64 and a
    long K): the translator stores its operands (Translator.matmul)."""
    return m >= WHOLE_GEMM_MIN_MN and n >= WHOLE_GEMM_MIN_MN and k >= WHOLE_GEMM_MIN_K


def _dtype_of_val(v):
    if isinstance(v, (tuple, list)):
        v = v[0]
    if v.dtype not in DTYPES:
        raise Unsupported(f"dtype {v.dtype}")
    return DTYPES[v.dtype]


def translate(name, nodes, inputs, outputs, constants=None) -> Program:
    """The program for a partition: `nodes` in graph order, `inputs` the external nodes they read,
    `outputs` the partition's nodes read outside it (or returned). `constants`: input node -> the
    tensor it holds at compile time (a module's buffer); an input holding tril(ones) is read as an
    index comparison instead of a tensor (`tril_constant`) and listed in the Program's `guards` (the
    call checks that the tensor still holds it). Raises Unsupported."""
    tr = Translator(name)
    tr.members = set(nodes)
    guards = []
    for k, n in enumerate(inputs):
        c = (constants or {}).get(n)
        if c is not None and tuple(c.shape) == tuple(_shape(n)) and tril_constant(c):
            tr.values[n] = tr.b.tril_input(_shape(n), _dtype(n))
            guards.append((k, "tril"))
        else:
            tr.values[n] = tr.b.input(f"x{k}", _shape(n), _dtype(n))
    for n in nodes:
        tr.values[n] = tr.run(n)
    unique, index, seen = [], [], {}
    for n in outputs:
        v = tr.values[n]
        if isinstance(v, tuple):
            raise Unsupported(f"{n}: a multi-output value is used outside the partition")
        shape = _shape(n)
        dtype = v.dtype if v.dtype else _dtype(n)
        # Two outputs with the same value (two views of one tensor, both read outside) are one output.
        key = (tuple(shape), dtype, _val(n).dtype, v.load([f"_i{d}_" for d in range(len(shape))]))
        if key not in seen:
            seen[key] = len(unique)
            unique.append((n, v, shape, dtype))
        index.append(seen[key])
    stacked = stack_outputs(tr, unique)
    if stacked is not None:
        dim, offsets, shape = stacked
        slices = [(dim, offsets[i], offsets[i + 1]) for i in index]
        return Program(name, tr.b.text(), list(inputs), list(outputs), [_val(unique[0][0]).dtype], [0] * len(index),
                       guards, slices, [shape])
    out_dtypes = []
    for n, v, shape, dtype in unique:
        if not tr.b.output_from_definition(v.load([f"i{d}" for d in range(len(shape))]), shape, dtype, f"y{len(out_dtypes)}"):
            tr.b.define(shape, dtype, lambda p, r, v=v: v.load(p), out=True, name=f"y{len(out_dtypes)}")
        out_dtypes.append(_val(n).dtype)
    return Program(name, tr.b.text(), list(inputs), list(outputs), out_dtypes, index, guards, [None] * len(index),
                   [u[2] for u in unique])


def stack_outputs(tr, unique):
    """Several outputs of an element-wise partition (no definition but its outputs) that have the same
    dtype and the same shape except along one dim `d` become one output: the outputs stacked along d,
    the dims after d flattened into one, each element a select of the output it belongs to (uniform
    per block: the stacked dim is outside the flattened one). Solder then writes all of them in one
    kernel, with blocks as long as the flattened dim allows, where one kernel per output of [.., 128]
    rows has blocks of 128 elements. The call views the result to the stacked torch shape and each
    former output is a slice of it (`Program.output_slices`). For RoPE before an attention: the rotated
    Q and K and the V relayout, [1, H, T, D], [1, Hkv, T, D] and [1, Hkv, T, D], are one
    [H + 2·Hkv, T·D] output. Returns (d, offsets along d, stacked torch shape) or None (nothing done)."""
    if len(unique) < 2 or tr.b.lines:
        return None
    shapes = [list(u[2]) for u in unique]
    dtypes = {u[3] for u in unique}
    torch_dtypes = {_val(u[0]).dtype for u in unique}
    rank = len(shapes[0])
    if len(dtypes) != 1 or len(torch_dtypes) != 1 or any(len(s) != rank for s in shapes) or rank < 2:
        return None
    differ = [d for d in range(rank) if len({s[d] for s in shapes}) > 1]
    if len(differ) != 1:
        return None
    d = differ[0]
    post = shapes[0][d + 1:]
    flat = math.prod(post) if post else 1
    if flat < 2:
        return None
    offsets = [0]
    for s in shapes:
        offsets.append(offsets[-1] + s[d])
    dtype = next(iter(dtypes))
    values = [u[1] for u in unique]

    def body(p, r):
        pre, at, f = p[:d], p[d], p[d + 1]
        rest = _unflatten(f, post) if len(post) > 1 else [f]
        text = None
        for k in reversed(range(len(values))):
            here = at if offsets[k] == 0 else f"({at} - {offsets[k]})"
            load = values[k].load(pre + [here] + rest)
            text = load if text is None else f"select({at} < {offsets[k + 1]}, {load}, {text})"
        return text

    tr.b.define(shapes[0][:d] + [offsets[-1], flat], dtype, body, out=True, name="y0")
    return d, offsets, shapes[0][:d] + [offsets[-1]] + post
