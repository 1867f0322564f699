#include "backend/cuda/contract_view.h"

#include <optional>
#include <set>

#include "backend/cuda/mma_stream_expr.h"
#include "contract/canonicalize.h"

namespace solder {
namespace {

bool constant(const Expr& e) { return !e || (vars_used(e).empty() && tensors_used(e).empty()); }

std::optional<DType> rounding_dtype(MmaType t) {
  switch (t) {
    case MmaType::bf16: return DType::bf16;
    case MmaType::f16: return DType::f16;
    case MmaType::f8e4m3: return DType::f8e4m3;
    case MmaType::f8e5m2: return DType::f8e5m2;
    default: return std::nullopt;
  }
}

class Viewer {
 public:
  Viewer(const KernelProgram& program, const Kernel& kernel, bool cast_computed)
      : program_(program), kernel_(kernel), cast_computed_(cast_computed) {}

  Block rewrite(const Block& block) {
    Block out;
    for (auto& s : block) {
      if (auto f = s.as<ForNode>()) {
        ForNode n = *f;
        n.body = rewrite(f->body);
        out.push_back(make_stmt(std::move(n)));
      } else if (auto i = s.as<IfNode>()) {
        IfNode n = *i;
        n.then_body = rewrite(i->then_body);
        n.else_body = rewrite(i->else_body);
        out.push_back(make_stmt(std::move(n)));
      } else if (auto c = s.as<ContractNode>()) {
        view(*c, out);
      } else {
        out.push_back(s);
      }
    }
    return out;
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  bool cast_computed_;

  std::optional<DType> dtype_of(const std::string& name) const {
    if (auto b = kernel_.find_buffer(name)) return b->dtype;
    if (auto g = program_.find_global(name)) return g->dtype;
    return std::nullopt;
  }

  Expr rounded(const Expr& x, MmaType type) const {
    auto to = rounding_dtype(type);
    if (!to) return x;
    auto exact = exact_mma_type(x, [this](const std::string& n) { return dtype_of(n); });
    if (!exact && !cast_computed_ && !x.as<LoadNode>()) return x;
    if (exact && (*exact == type || (*exact != MmaType::bf16 && *exact != MmaType::f16 && type != MmaType::f8e4m3 && type != MmaType::f8e5m2)))
      return cast_computed_ && x.as<SelectNode>() ? written_exact(x, *to) : x;  // already a value of T (fp8 values are exact in the 16-bit types)
    return make_cast(*to, x);
  }

  // One product term as the contract means it: round_T(a) · round_T(b), or for 3xtf32 the three tf32
  // products hi(a)·lo(b) + lo(a)·hi(b) + hi(a)·hi(b) (hi = round_tf32(x), lo = round_tf32(x − hi(x))),
  // so that a contract no tensor-core fit takes means the same on CUDA cores.
  Expr product(const ContractTerm& t, MmaType type) const {
    if (type != MmaType::tf32x3) return rounded(t.a, type) * rounded(t.b, type);
    auto hi = [](const Expr& x) { return make_unary(UnaryOp::round_tf32, x); };
    auto lo = [&](const Expr& x) { return make_unary(UnaryOp::round_tf32, x - hi(x)); };
    return hi(t.a) * lo(t.b) + lo(t.a) * hi(t.b) + hi(t.a) * hi(t.b);
  }

  // A select exact in T (K ranges merged, a zero-fill) with each branch written so that the generic
  // writer sees it is exact: a branch that is neither a tile load, a cast nor 0 (a load of a 16-bit
  // global) is cast to T, which changes no value.
  Expr written_exact(const Expr& x, DType to) const {
    if (auto s = x.as<SelectNode>()) return make_select(s->cond, written_exact(s->if_true, to), written_exact(s->if_false, to));
    if (auto c = x.as<ConstNode>(); c && c->value == 0) return x;
    if (x.as<CastNode>()) return x;
    if (auto load = x.as<LoadNode>(); load && kernel_.find_buffer(load->tensor)) return x;
    return make_cast(to, x);
  }

  // A buffer name not yet used by the kernel or the program.
  std::string fresh_name(const std::string& base) const {
    std::string name = base;
    for (int i = 2; kernel_.find_buffer(name) || program_.find_global(name) || added_names_.count(name); ++i)
      name = base + std::to_string(i);
    return name;
  }

  void view(const ContractNode& c, Block& out) {
    Expr products;
    // K ranges (a concatenation along K, split by the canonicalizer) that share their other operand
    // run as one product of the merged operand: one MMA per K step, not one per range.
    for (auto& t : merge_k_range_terms(c.terms)) {
      Expr p = product(t, c.type);
      products = products ? products + p : p;
    }
    int64_t count = 1;
    for (auto& a : c.reduce_axes) count *= a.extent;
    const Buffer* dst = kernel_.find_buffer(c.dst.name);
    std::string type = "contract with T = " + std::string(mma_type_name(c.type));
    ReduceNode r;
    r.op = ReduceOp::sum;
    r.domain = c.domain;
    r.reduce_axes = c.reduce_axes;
    r.where = c.where;
    r.comment = c.comment.empty() ? type : c.comment + "; " + type;
    // A constant scale multiplies each term in the attention emitter's view (it moves the scale after
    // the dot product itself); the generic writer gets the epilogue form, so that its tensor cores
    // (gemm_codegen.h) take the dot product as they take an unscaled one.
    const bool epilogue = c.bias || (c.scale && (cast_computed_ || !constant(c.scale))) || c.epilogue || !c.pair_terms.empty();
    if (!epilogue) {
      // The scale (a constant) multiplies each term; the bias, if constant too, each point.
      Expr value = products;
      if (c.scale) value = value * c.scale;
      if (c.bias) value = value + (count == 1 ? c.bias : c.bias / make_const(static_cast<double>(count)));
      r.dst = c.dst;
      r.accumulate = c.accumulate;
      r.value = value;
      out.push_back(make_stmt(std::move(r)));
      return;
    }
    // The dot product into an f32 tile (dst itself when it is one and is not accumulated onto), then
    // the epilogue: dst (+)= dot · scale + bias.
    // A contract accumulating onto a tile that the statement before it fills with 0 writes 0 + v = v:
    // in place as well.
    bool onto_zero = false;
    if (auto fill = out.empty() ? nullptr : out.back().as<FillNode>()) onto_zero = fill->buffer == c.dst.name && fill->value == 0;
    const bool in_place = (!c.accumulate || onto_zero) && !c.epilogue && dst && dst->dtype == DType::f32;
    Access dot = c.dst;
    if (!in_place) {
      Buffer temp;
      temp.name = fresh_name(c.dst.name + "_dot");
      temp.dtype = DType::f32;
      temp.scope = Scope::register_file;
      for (auto& a : c.domain.axes) {
        temp.shape.push_back(a.extent);
      }
      if (temp.shape.empty()) temp.shape.push_back(1);
      std::vector<Expr> index;
      for (auto& a : c.domain.axes) index.push_back(make_var(a.var));
      if (index.empty()) index.push_back(make_int(0));
      dot = Access{temp.name, index};
      added_names_.insert(temp.name);
      added_.push_back(std::move(temp));
    }
    r.dst = dot;
    r.accumulate = false;
    r.value = products;
    // A paired contract: its second product into a tile of its own, read by the epilogue.
    std::optional<Access> pair_dot;
    if (!c.pair_terms.empty()) {
      Expr pair_products;
      for (auto& t : c.pair_terms) {
        Expr p = product(t, c.type);
        pair_products = pair_products ? pair_products + p : p;
      }
      Buffer temp;
      temp.name = fresh_name(c.dst.name + "_pair_dot");
      temp.dtype = DType::f32;
      temp.scope = Scope::register_file;
      for (auto& a : c.domain.axes) temp.shape.push_back(a.extent);
      if (temp.shape.empty()) temp.shape.push_back(1);
      std::vector<Expr> index;
      for (auto& a : c.domain.axes) index.push_back(make_var(a.var));
      if (index.empty()) index.push_back(make_int(0));
      pair_dot = Access{temp.name, index};
      added_names_.insert(temp.name);
      added_.push_back(std::move(temp));
      ReduceNode pr = r;
      pr.dst = *pair_dot;
      pr.value = pair_products;
      out.push_back(make_stmt(std::move(r)));
      out.push_back(make_stmt(std::move(pr)));
    } else {
      out.push_back(make_stmt(std::move(r)));
    }
    MapNode m;
    m.domain = c.domain;
    m.dst = c.dst;
    Expr v = make_load(dot.name, dot.index);
    if (c.scale) v = v * c.scale;
    if (c.bias) v = v + c.bias;
    if (c.epilogue) {
      // value[0] is v at this point (rounded to f32, as the dot already is)
      const Expr at = v;
      const Expr pair_at = pair_dot ? make_load(pair_dot->name, pair_dot->index) : Expr();
      v = mma_stream::rewrite_loads(c.epilogue, [&](const LoadNode& load, const Expr& e) {
        if (load.tensor == c.value) return at;
        return pair_dot && load.tensor == c.pair_value ? pair_at : e;
      });
    }
    if (c.accumulate && !in_place) v = make_load(c.dst.name, c.dst.index) + v;  // in place: onto 0
    m.value = v;
    m.comment = "the contract's epilogue: scale and bias after the dot product";
    out.push_back(make_stmt(std::move(m)));
  }

 public:
  std::vector<Buffer> added_;  // temporaries of the dot products
  std::set<std::string> added_names_;
};

}  // namespace

KernelProgram contracts_as_reduces(const KernelProgram& program, bool cast_computed) {
  KernelProgram out = program;
  for (auto& kernel : out.kernels) {
    Viewer viewer(program, kernel, cast_computed);
    kernel.body = viewer.rewrite(kernel.body);
    kernel.buffers.insert(kernel.buffers.end(), viewer.added_.begin(), viewer.added_.end());
  }
  return out;
}

}  // namespace solder
