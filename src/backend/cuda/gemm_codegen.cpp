// Contractions on tensor cores in the generic writer (gemm_codegen.h): the recogniser, then the
// writer's two forms (the staged loop, one reduce on float tiles) and gemm statements.
#include "backend/cuda/gemm_codegen.h"

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"
#include "kernel/kernel_printer.h"

namespace solder::generic {

namespace {

bool sixteen_bit(DType t) { return t == DType::bf16 || t == DType::f16; }

// The stride, in elements, of each axis variable in a tile access whose indices are each the
// constant 0 or an axis variable covering its dimension whole (unit axes index nothing: stride 0).
// Empty with `why` set otherwise.
std::optional<std::map<std::string, int64_t>> axis_strides(const Access& access, const Buffer& tile,
                                                          const std::map<std::string, int64_t>& extents, std::string& why) {
  std::map<std::string, int64_t> strides;
  int64_t stride = 1;
  for (size_t d = access.index.size(); d-- > 0;) {
    const Expr& index = access.index[d];
    if (auto c = index.as<ConstNode>(); c && c->value == 0) {
    } else if (auto v = index.as<VarNode>(); v && extents.count(v->name)) {
      const int64_t extent = extents.at(v->name);
      if (extent != 1) {
        if (extent != tile.shape[d] || strides.count(v->name)) {
          why = "tile " + tile.name + " is not indexed by whole axes";
          return std::nullopt;
        }
        strides[v->name] = stride;
      }
    } else {
      why = "index " + print_expr(index) + " of " + tile.name + " is not an axis of the statement";
      return std::nullopt;
    }
    stride *= tile.shape[d];
  }
  return strides;
}

}  // namespace

ContractionMatch match_contraction(const ReduceNode& n, const Kernel& kernel) {
  auto refuse = [](std::string why) { return ContractionMatch{std::nullopt, std::move(why)}; };
  if (n.op != ReduceOp::sum) return refuse("not a sum");
  if (n.domain.guard) return refuse("a guarded domain");
  if (n.where) return refuse("a where condition on the reduced points");
  std::map<std::string, int64_t> extents;
  std::vector<std::string> kept, reduced;
  for (auto& a : n.domain.axes) {
    extents[a.var] = a.extent;
    if (a.extent != 1) kept.push_back(a.var);
  }
  for (auto& a : n.reduce_axes) {
    extents[a.var] = a.extent;
    if (a.extent != 1) reduced.push_back(a.var);
  }
  if (reduced.size() != 1) return refuse("reduces over " + std::to_string(reduced.size()) + " axes (one is a matrix product)");
  auto product = n.value.as<BinaryNode>();
  if (!product || product->op != BinaryOp::mul) return refuse("the summand is not a product");
  const LoadNode* loads[2] = {product->lhs.as<LoadNode>(), product->rhs.as<LoadNode>()};
  for (int i = 0; i < 2; ++i)
    if (!loads[i]) return refuse("operand " + print_expr(i ? product->rhs : product->lhs) + " is not a staged tile (an expression)");
  const Buffer* tiles[2] = {kernel.find_buffer(loads[0]->tensor), kernel.find_buffer(loads[1]->tensor)};
  const Buffer* c = kernel.find_buffer(n.dst.name);
  for (int i = 0; i < 2; ++i) {
    if (!tiles[i]) return refuse("operand " + loads[i]->tensor + " is a global, not a staged tile");
    if (!sixteen_bit(tiles[i]->dtype))
      return refuse("operand " + loads[i]->tensor + " is " + std::string(dtype_name(tiles[i]->dtype)) + " (tensor cores only for bf16/f16 operands)");
  }
  if (tiles[0]->dtype != tiles[1]->dtype) return refuse("operands of two dtypes");
  if (tiles[0] == tiles[1]) return refuse("both operands read tile " + tiles[0]->name);
  if (!c || c->dtype != DType::f32) return refuse("the result is not an f32 tile");
  std::string why;
  std::optional<std::map<std::string, int64_t>> strides[2], c_strides = axis_strides(n.dst, *c, extents, why);
  for (int i = 0; i < 2; ++i) strides[i] = axis_strides(Access{loads[i]->tensor, loads[i]->index}, *tiles[i], extents, why);
  if (!strides[0] || !strides[1] || !c_strides) return refuse(why);
  const std::string& k = reduced[0];
  if (c_strides->count(k)) return refuse("the result is indexed by the reduced axis");
  // Each operand holds the reduced axis and at most one kept axis; C holds every kept axis.
  std::string axis_of[2];
  for (int i = 0; i < 2; ++i) {
    if (!strides[i]->count(k)) return refuse("operand " + tiles[i]->name + " does not run along the reduced axis");
    for (auto& [var, stride] : *strides[i]) {
      if (var == k) continue;
      if (!axis_of[i].empty()) return refuse("operand " + tiles[i]->name + " spans two kept axes");
      axis_of[i] = var;
    }
  }
  if (axis_of[0] == axis_of[1] && !axis_of[0].empty()) return refuse("both operands run along axis " + axis_of[0]);
  for (auto& var : kept) {
    if (var != axis_of[0] && var != axis_of[1]) return refuse("kept axis " + var + " is in neither operand (a broadcast)");
    if (!c_strides->count(var)) return refuse("the result is not indexed by kept axis " + var);
  }
  // Roles: B (n) needs whole 16-column pairs, A (m) at most 16 rows or whole m-tiles; prefer A with
  // its depth contiguous (what the staged loop needs).
  auto extent_of = [&](const std::string& var) { return var.empty() ? int64_t{1} : extents.at(var); };
  auto build = [&](int ai) {
    const int bi = 1 - ai;
    Contraction r;
    r.a = tiles[ai]->name;
    r.b = tiles[bi]->name;
    r.c = c->name;
    r.type = tiles[ai]->dtype;
    r.m = extent_of(axis_of[ai]);
    r.n = extent_of(axis_of[bi]);
    r.k = extents.at(k);
    r.a_depth = strides[ai]->at(k);
    r.a_row = axis_of[ai].empty() ? 0 : strides[ai]->at(axis_of[ai]);
    r.b_depth = strides[bi]->at(k);
    r.b_column = axis_of[bi].empty() ? 0 : strides[bi]->at(axis_of[bi]);
    r.b_k_major = r.b_depth == 1;
    r.c_row = axis_of[ai].empty() ? 0 : c_strides->at(axis_of[ai]);
    r.c_column = axis_of[bi].empty() ? 0 : c_strides->at(axis_of[bi]);
    r.accumulate = n.accumulate;
    return r;
  };
  auto shape_rule = [](const Contraction& r) -> std::string {
    if (r.n % 16) return "N = " + std::to_string(r.n) + " columns is not a multiple of 16";
    if (r.m > 16 && r.m % 16) return "M = " + std::to_string(r.m) + " rows is neither at most 16 nor a multiple of 16";
    return "";
  };
  std::optional<Contraction> chosen;
  std::string refusal;
  for (int ai : {0, 1}) {
    Contraction r = build(ai);
    std::string rule = shape_rule(r);
    if (!rule.empty()) {
      if (refusal.empty()) refusal = rule;
      continue;
    }
    if (!chosen || (chosen->a_depth != 1 && r.a_depth == 1)) chosen = r;
  }
  if (!chosen) return refuse(refusal);
  return ContractionMatch{chosen, ""};
}

// ---- The writer ---------------------------------------------------------------------------------

namespace {

std::string type_name(DType t) { return t == DType::f16 ? "__half" : "__nv_bfloat16"; }

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// How many statements of `body` (nested bodies included) mention `name` as a whole word.
int mentions(const Block& body, const std::string& name) {
  const std::regex word("\\b" + name + "\\b");
  int count = 0;
  for (auto& s : body) {
    if (auto f = s.as<ForNode>()) {
      count += std::regex_search(print_expr(f->begin) + " " + print_expr(f->end), word);
      count += mentions(f->body, name);
    } else if (auto i = s.as<IfNode>()) {
      count += std::regex_search(print_expr(i->cond), word);
      count += mentions(i->then_body, name) + mentions(i->else_body, name);
    } else {
      count += std::regex_search(print_stmt(s), word);
    }
  }
  return count;
}

}  // namespace

// The staged loop: the contraction, its two staging copies, and the buffers ahead.
struct KernelWriter::ContractionLoop {
  Contraction contraction;
  const CopyNode* copy_a = nullptr;
  const CopyNode* copy_b = nullptr;
  int stages = 2;
  int64_t a_elements = 0, b_elements = 0;  // per buffer, 128-byte aligned
  int64_t stage_bytes() const { return (a_elements + b_elements) * 2; }
};

std::optional<KernelWriter::ContractionLoop> KernelWriter::contraction_loop_plan(const ForNode& loop, std::string& why) const {
  if (loop.body.size() != 3) return std::nullopt;
  auto r = loop.body[2].as<ReduceNode>();
  auto c0 = loop.body[0].as<CopyNode>(), c1 = loop.body[1].as<CopyNode>();
  if (!r || !c0 || !c1) return std::nullopt;
  ContractionMatch match = match_contraction(*r, kernel_);
  if (!match.contraction) return std::nullopt;  // the reduce says why, where it is written
  ContractionLoop plan;
  const Contraction& g = plan.contraction = *match.contraction;
  for (auto c : {c0, c1}) {
    if (c->dst.name == g.a) plan.copy_a = c;
    if (c->dst.name == g.b) plan.copy_b = c;
  }
  if (!plan.copy_a || !plan.copy_b) {
    why = "the loop's copies are not the operands' staging";
    return std::nullopt;
  }
  if (g.k % 16) { why = "K = " + std::to_string(g.k) + " is not a multiple of 16"; return std::nullopt; }
  const Buffer* a = kernel_.find_buffer(g.a);
  const Buffer* b = kernel_.find_buffer(g.b);
  // The tiles are exactly [m][k] and [k][n] (or [n][k]), the depth (or columns) contiguous.
  if (a->elements() != g.m * g.k || g.a_depth != 1 || (g.m > 1 && g.a_row != g.k)) {
    why = "tile " + g.a + " is not [M][K] with K contiguous";
    return std::nullopt;
  }
  if (b->elements() != g.k * g.n || (g.b_k_major ? g.b_column != g.k : (g.b_column != 1 || g.b_depth != g.n))) {
    why = "tile " + g.b + " is not [K][N] or [N][K]";
    return std::nullopt;
  }
  for (auto c : {plan.copy_a, plan.copy_b}) {
    const GlobalTensor* src = program_.find_global(c->src.name);
    auto vectors = vector_plan(*c);
    bool loads = false;
    for (auto* index : {&c->src.index, &c->dst.index})
      for (auto& i : *index) for_each_load(i, [&](const LoadNode&) { loads = true; });
    if (!src || src->role != GlobalRole::input || src->dtype != kernel_.find_buffer(c->dst.name)->dtype || c->domain.guard || loads ||
        !vectors || vectors->vector != 8 || !owned_index(c->dst.index, array(c->dst.name).shape, c->domain.axes)) {
      why = "the copy into " + c->dst.name + " is not a plain 16-byte staging of an input of its dtype";
      return std::nullopt;
    }
  }
  for (auto& name : {g.a, g.b})
    if (mentions(kernel_.body, name) != 2) {
      why = "tile " + name + " is used outside the loop's copy and contraction";
      return std::nullopt;
    }
  plan.a_elements = round_up(g.m * g.k, 64);
  plan.b_elements = round_up(g.k * g.n, 64);
  // Buffers: 2 to 4, as many as fit in 160 KB with the kernel's other tiles (as float).
  int64_t others = 0;
  for (auto& b : kernel_.buffers)
    if (b.name != g.a && b.name != g.b) others += b.elements() * 4;
  plan.stages = static_cast<int>(std::clamp<int64_t>((160 * 1024 - others) / plan.stage_bytes(), 2, 4));
  return plan;
}

namespace {
// Every staged contraction loop of a kernel, in order.
template <class Plan>
void for_each_contraction_loop(const Block& body, const Plan& plan) {
  struct Finder : StmtVisitor {
    const Plan* plan;
    using StmtVisitor::visit;
    void visit(const ForNode& loop) override {
      (*plan)(loop);
      StmtVisitor::visit(loop);
    }
  } f;
  f.plan = &plan;
  f.visit(body);
}
}  // namespace

int64_t KernelWriter::contraction_staging_bytes() const {
  int64_t bytes = 0;
  for_each_contraction_loop(kernel_.body, [&](const ForNode& loop) {
    std::string why;
    if (auto plan = contraction_loop_plan(loop, why)) bytes = std::max(bytes, plan->stages * plan->stage_bytes());
  });
  return bytes;
}

std::set<std::string> KernelWriter::contraction_staged_tiles() const {
  std::set<std::string> tiles;
  for_each_contraction_loop(kernel_.body, [&](const ForNode& loop) {
    std::string why;
    if (auto plan = contraction_loop_plan(loop, why)) tiles.insert({plan->contraction.a, plan->contraction.b});
  });
  return tiles;
}

bool KernelWriter::contraction_loop(std::ostringstream& out, const ForNode& loop, int indent) {
  std::string why;
  auto plan = contraction_loop_plan(loop, why);
  if (!plan) {
    if (!why.empty()) out << pad(indent) << "// tensor cores: the staged loop not used for " << loop.var << ": " << why << "\n";
    return false;
  }
  const Contraction& g = plan->contraction;
  const std::string T = type_name(g.type), p = pad(indent), v = cuda_identifier(loop.var), S = std::to_string(plan->stages);
  flush(out, indent);
  out << p << "{  // tensor cores (block_gemm): " << g.c << " " << (g.accumulate ? "+=" : "=") << " " << g.a << " · " << g.b << " over " << loop.var
      << ", the accumulators in registers across the loop; " << g.a << " and " << g.b << " staged as " << dtype_name(g.type)
      << " by cp.async, " << S << " buffers\n";
  const int in = indent + 1;
  const std::string q = pad(in);
  out << q << T << "* const gemm_a_ = reinterpret_cast<" << T << "*>(smem + " << contraction_offset_ << ");  // buffers of " << g.a << "\n";
  out << q << T << "* const gemm_b_ = gemm_a_ + " << plan->stages * plan->a_elements << ";  // buffers of " << g.b << "\n";
  out << q << "solder::tile::BlockGemm<" << T << ", " << g.m << ", " << g.n << ", " << g.k << ", " << kWarps << "> gemm_;\n";
  out << q << "const long long begin_ = " << printer_.print_int(loop.begin) << ", end_ = " << printer_.print_int(loop.end) << ";\n";
  // Each block starts the loop at its own iteration (the sum's order, not its terms, changes): the
  // blocks that read the same operand tiles (a weight every block reads) do not all ask the same L2
  // lines at the same time.
  out << q << "const long long rotate_ = end_ > begin_ ? static_cast<long long>(blockIdx.x) % (end_ - begin_) : 0;\n";
  // One buffer of both tiles: 16 bytes per cp.async, at the swizzled place of the tile element.
  out << q << "auto stage_ = [&](long long next_, int slot_) {  // iteration next_ into buffer slot_\n";
  out << q << "  if (next_ < end_) {\n";
  out << q << "    const long long " << v << " = begin_ + (next_ - begin_ + rotate_) % (end_ - begin_);\n";
  for (auto [copy, buffer, elements] : {std::tuple{plan->copy_a, std::string("gemm_a_"), plan->a_elements},
                                        std::tuple{plan->copy_b, std::string("gemm_b_"), plan->b_elements}}) {
    const auto& axes = copy->domain.axes;
    const CudaArray& src = array(copy->src.name);
    const std::string columns = std::to_string(array(copy->dst.name).shape.back());
    if (!copy->comment.empty()) out << q << "    // " << copy->comment << "\n";
    out << q << "    for (int vec_ = threadIdx.x; vec_ < " << vector_plan(*copy)->vectors << "; vec_ += " << kThreads << ") {\n";
    out << q << "      int rest_ = vec_ * 8;\n";
    for (size_t d = axes.size(); d-- > 0;)
      out << q << "      const long long " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << "; rest_ /= " << axes[d].extent << ";\n";
    out << q << "      (void)rest_;\n";
    auto index = index_texts(copy->src.index);
    out << q << "      const bool inside_ = " << in_bounds(src, index) << ";\n";
    out << q << "      solder::tile::cp_async_16(" << buffer << " + slot_ * " << elements << " + solder::tile::Swizzle<" << columns
        << ">::offset(vec_ * 8 / " << columns << ", vec_ * 8 % " << columns << "), inside_ ? " << src.pointer << " + "
        << printer_.offset(src, index) << " : " << src.pointer << ", inside_);\n";
    out << q << "    }\n";
  }
  out << q << "  }\n";
  out << q << "  solder::tile::cp_async_commit();  // a group per buffer, empty past the end\n";
  out << q << "};\n";
  out << q << "for (int s_ = 0; s_ < " << plan->stages - 1 << "; ++s_) stage_(begin_ + s_, s_);\n";
  out << q << "for (long long iteration_ = begin_; iteration_ < end_; ++iteration_) {\n";
  out << q << "  const int slot_ = static_cast<int>((iteration_ - begin_) % " << S << ");\n";
  out << q << "  solder::tile::cp_async_wait<" << plan->stages - 2 << ">();  // this iteration's buffer has landed\n";
  out << q << "  __syncthreads();  // for every thread; and every thread is done with the buffer staged next\n";
  out << q << "  stage_(iteration_ + " << plan->stages - 1 << ", (slot_ + " << plan->stages - 1 << ") % " << S << ");\n";
  if (!loop.body[2].get()->comment.empty()) out << q << "  // " << loop.body[2].get()->comment << "\n";
  out << q << "  gemm_.accumulate(solder::tile::SwizzledA<" << T << ", " << g.m << ", " << g.k << ">{gemm_a_ + slot_ * " << plan->a_elements
      << "}, solder::tile::SwizzledB<" << T << ", " << g.k << ", " << g.n << ", " << (g.b_k_major ? "true" : "false") << ">{gemm_b_ + slot_ * "
      << plan->b_elements << "});\n";
  out << q << "}\n";
  out << q << "solder::tile::cp_async_wait<0>();\n";
  out << q << "gemm_.write(" << cuda_identifier(g.c) << ", " << g.c_row << ", " << g.c_column << ", " << (g.accumulate ? "true" : "false") << ");\n";
  out << p << "}\n";
  barrier(out, indent);
  return true;
}

bool KernelWriter::contraction_reduce(std::ostringstream& out, const ReduceNode& n, int indent) {
  ContractionMatch match = match_contraction(n, kernel_);
  if (!match.contraction) {
    // Say why only for what looks like a contraction: a sum of a product.
    auto product = n.value.as<BinaryNode>();
    if (n.op == ReduceOp::sum && product && product->op == BinaryOp::mul)
      out << pad(indent) << "// tensor cores not used for " << n.dst.name << ": " << match.refusal << "\n";
    return false;
  }
  const Contraction& g = *match.contraction;
  const std::string T = type_name(g.type), p = pad(indent);
  flush(out, indent);
  out << p << "{  // tensor cores (block_gemm on the float tiles): " << g.c << " " << (g.accumulate ? "+=" : "=") << " " << g.a << " · " << g.b << "\n";
  out << p << "  solder::tile::BlockGemm<" << T << ", " << g.m << ", " << g.n << ", " << round_up(g.k, 16) << ", " << kWarps << "> gemm_;\n";
  out << p << "  gemm_.accumulate(solder::tile::FloatA<" << T << ">{" << cuda_identifier(g.a) << ", " << g.m << ", " << g.k << ", " << g.a_row << ", "
      << g.a_depth << "}, solder::tile::FloatB<" << T << ">{" << cuda_identifier(g.b) << ", " << g.k << ", " << g.b_depth << ", " << g.b_column << "});\n";
  out << p << "  gemm_.write(" << cuda_identifier(g.c) << ", " << g.c_row << ", " << g.c_column << ", " << (g.accumulate ? "true" : "false") << ");\n";
  out << p << "}\n";
  barrier(out, indent);
  return true;
}

// c (+)= a · b over whole buffers: on tensor cores when a and b are 16-bit tiles of one dtype and c
// is f32 (c[M,N], a[M,K] or [K,M], b[K,N] or [N,K]); a scalar loop otherwise.
void KernelWriter::gemm(std::ostringstream& out, const GemmNode& n, int indent) {
  const Buffer* a = kernel_.find_buffer(n.a);
  const Buffer* b = kernel_.find_buffer(n.b);
  const Buffer* c = kernel_.find_buffer(n.c);
  int64_t M = c->shape[0], N = c->shape[1], K = n.trans_a ? a->shape[0] : a->shape[1];
  std::string A = cuda_identifier(n.a), B = cuda_identifier(n.b), C = cuda_identifier(n.c);
  std::string refusal;
  if (!sixteen_bit(a->dtype) || a->dtype != b->dtype) refusal = "operands are not both bf16 or both f16";
  else if (c->dtype != DType::f32) refusal = "the result is not f32";
  else if (N % 16) refusal = "N = " + std::to_string(N) + " columns is not a multiple of 16";
  else if (M > 16 && M % 16) refusal = "M = " + std::to_string(M) + " rows is neither at most 16 nor a multiple of 16";
  if (refusal.empty()) {
    const std::string T = type_name(a->dtype);
    out << pad(indent) << "{  // tensor cores (block_gemm on the float tiles)\n";
    out << pad(indent) << "  solder::tile::BlockGemm<" << T << ", " << M << ", " << N << ", " << round_up(K, 16) << ", " << kWarps << "> gemm_;\n";
    out << pad(indent) << "  gemm_.accumulate(solder::tile::FloatA<" << T << ">{" << A << ", " << M << ", " << K << ", "
        << (n.trans_a ? 1 : K) << ", " << (n.trans_a ? M : 1) << "}, solder::tile::FloatB<" << T << ">{" << B << ", " << K << ", "
        << (n.trans_b ? 1 : N) << ", " << (n.trans_b ? K : 1) << "});\n";
    out << pad(indent) << "  gemm_.write(" << C << ", " << N << ", 1, " << (n.accumulate ? "true" : "false") << ");\n";
    out << pad(indent) << "}\n";
    sync(out, indent);
    return;
  }
  out << pad(indent) << "// tensor cores not used for gemm " << n.c << ": " << refusal << "\n";
  out << pad(indent) << "for (long long e = threadIdx.x; e < " << M * N << "LL; e += blockDim.x) {\n";
  out << pad(indent + 1) << "const long long row = e / " << N << "LL, col = e % " << N << "LL;\n";
  out << pad(indent + 1) << "float acc = " << (n.accumulate ? C + "[e]" : "0.0f") << ";\n";
  std::string av = n.trans_a ? A + "[k * " + std::to_string(a->shape[1]) + "LL + row]" : A + "[row * " + std::to_string(a->shape[1]) + "LL + k]";
  std::string bv = n.trans_b ? B + "[col * " + std::to_string(b->shape[1]) + "LL + k]" : B + "[k * " + std::to_string(b->shape[1]) + "LL + col]";
  out << pad(indent + 1) << "for (long long k = 0; k < " << K << "LL; ++k) acc += " << av << " * " << bv << ";\n";
  out << pad(indent + 1) << C << "[e] = acc;\n";
  out << pad(indent) << "}\n";
  sync(out, indent);
}

}  // namespace solder::generic
