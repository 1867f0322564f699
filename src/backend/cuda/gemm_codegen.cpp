// Contractions on tensor cores in the generic writer (gemm_codegen.h): the writer's two forms (the
// staged loop, one reduce with its computed operands). The recogniser is in
// gemm_contraction_match.cpp.
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

// ---- The writer ---------------------------------------------------------------------------------

namespace {


std::string type_name(DType t) { return t == DType::f16 ? "__half" : "__nv_bfloat16"; }

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The 16-bit tiles of a one-reduce contraction's computed operands: A as [M][K'], B as [N][K'] (K'
// = K rounded up to 16), each 128-byte aligned, A first.
struct ComputedOperands {
  int64_t a_elements = 0, b_elements = 0;
  ComputedOperands() = default;
  explicit ComputedOperands(const Contraction& g) {
    if (g.a_computed) a_elements = round_up(g.m * round_up(g.k, 16), 64);
    if (g.b_computed) b_elements = round_up(g.n * round_up(g.k, 16), 64);
  }
  int64_t a_bytes() const { return a_elements * 2; }
  int64_t bytes() const { return (a_elements + b_elements) * 2; }
};
// Beyond this the reduce stays scalar (the kernel's other tiles need the room).
constexpr int64_t kMaxComputedOperandBytes = 64 * 1024;

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
  if (g.a_computed || g.b_computed) {
    why = "operand " + (g.a_computed ? g.a : g.b) + " is computed (evaluated into a 16-bit tile at each reduce, not staged by cp.async)";
    return std::nullopt;
  }
  if (g.result_type != DType::f32) {
    why = "the result " + g.c + " is " + std::string(dtype_name(g.result_type)) +
          ", rounded at every step of the loop (the accumulators cannot stay in f32 registers across it)";
    return std::nullopt;
  }
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
  // The computed operands of one-reduce contractions use the same space (never at the same time).
  struct Reduces : StmtVisitor {
    const Kernel* kernel;
    int64_t bytes = 0;
    using StmtVisitor::visit;
    void visit(const ReduceNode& r) override {
      ContractionMatch match = match_contraction(r, *kernel);
      if (match.contraction) bytes = std::max(bytes, ComputedOperands(*match.contraction).bytes());
    }
  } reduces;
  reduces.kernel = &kernel_;
  reduces.visit(kernel_.body);
  return std::max(bytes, reduces.bytes <= kMaxComputedOperandBytes ? reduces.bytes : 0);
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
  contraction_choices_.push_back({g.c, true, g.type, g.m, g.n, round_up(g.k, 16), static_cast<int>(plan->stages), ""});
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
    auto index = index_texts(copy->src);
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
  const ComputedOperands computed = match.contraction ? ComputedOperands(*match.contraction) : ComputedOperands();
  if (match.contraction && computed.bytes() > kMaxComputedOperandBytes)
    match = ContractionMatch{std::nullopt, "the computed operand tiles need " + std::to_string(computed.bytes()) + " bytes (more than " +
                                               std::to_string(kMaxComputedOperandBytes) + ")"};
  if (!match.contraction) {
    // Say why only for what looks like a contraction: a sum of a product.
    auto product = n.value.as<BinaryNode>();
    if (n.op == ReduceOp::sum && product && product->op == BinaryOp::mul)
      out << pad(indent) << "// tensor cores not used for " << n.dst.name << ": " << match.refusal << "\n";
    if (n.op == ReduceOp::sum) contraction_choices_.push_back({n.dst.name, false, DType::f32, 0, 0, 0, 0, match.refusal});
    return false;
  }
  const Contraction& g = *match.contraction;
  contraction_choices_.push_back({g.c, true, g.type, g.m, g.n, round_up(g.k, 16), 0, ""});
  const std::string T = type_name(g.type), p = pad(indent), q = pad(indent + 1);
  const int64_t depth = round_up(g.k, 16);
  flush(out, indent);
  out << p << "{  // tensor cores (block_gemm" << (g.a_computed || g.b_computed ? "" : " on the float tiles") << "): " << g.c << " "
      << (g.accumulate ? "+=" : "=") << " " << g.a << " · " << g.b;
  if (g.a_computed || g.b_computed) out << "; computed operands evaluated once per element into " << dtype_name(g.type) << " tiles";
  out << "\n";
  // A computed operand: element (row, d) of A, or (d, column) of B stored at row / column, depth d of
  // a [rows][depth] Swizzle<depth> tile (B so stored is k-major); depth past K is 0.
  auto evaluate = [&](const std::string& pointer, int64_t offset, const Expr& value, const std::string& row_axis, int64_t rows) {
    out << q << T << "* const " << pointer << " = reinterpret_cast<" << T << "*>(smem + " << contraction_offset_ + offset << ");  // "
        << print_expr(value) << "\n";
    out << q << "for (int e_ = threadIdx.x; e_ < " << rows * depth << "; e_ += " << kThreads << ") {\n";
    out << q << "  const int row_ = e_ / " << depth << ", depth_ = e_ % " << depth << ";\n";
    out << q << "  float value_ = 0.0f;\n";
    out << q << "  if (depth_ < " << g.k << ") {\n";
    for (auto* axes : {&n.domain.axes, &n.reduce_axes})
      for (auto& axis : *axes) {
        const std::string at = axis.var == row_axis ? "row_" : axis.var == g.depth_axis ? "depth_" : "0";
        out << q << "    const long long " << cuda_identifier(axis.var) << " = " << at << "; (void)" << cuda_identifier(axis.var) << ";\n";
      }
    out << q << "    value_ = " << printer_.print_float(value) << ";\n";
    out << q << "  }\n";
    out << q << "  " << pointer << "[solder::tile::Swizzle<" << depth << ">::offset(row_, depth_)] = " << T << "(value_);  // exact\n";
    out << q << "}\n";
  };
  if (g.a_computed) evaluate("gemm_a_", 0, g.a_value, g.row_axis, g.m);
  if (g.b_computed) evaluate("gemm_b_", computed.a_bytes(), g.b_value, g.column_axis, g.n);
  if (g.a_computed || g.b_computed) out << q << "__syncthreads();\n";
  out << q << "solder::tile::BlockGemm<" << T << ", " << g.m << ", " << g.n << ", " << depth << ", " << kWarps << "> gemm_;\n";
  std::string a_operand = "solder::tile::SwizzledA<" + T + ", " + std::to_string(g.m) + ", " + std::to_string(depth) + ">{gemm_a_}";
  if (!g.a_computed)
    a_operand = "solder::tile::FloatA<" + T + ">{" + cuda_identifier(g.a) + ", " + std::to_string(g.m) + ", " + std::to_string(g.k) + ", " +
                std::to_string(g.a_row) + ", " + std::to_string(g.a_depth) + "}";
  std::string b_operand = "solder::tile::SwizzledB<" + T + ", " + std::to_string(depth) + ", " + std::to_string(g.n) + ", true>{gemm_b_}";
  if (!g.b_computed)
    b_operand = "solder::tile::FloatB<" + T + ">{" + cuda_identifier(g.b) + ", " + std::to_string(g.k) + ", " + std::to_string(g.b_depth) + ", " +
                std::to_string(g.b_column) + "}";
  out << q << "gemm_.accumulate(" << a_operand << ", " << b_operand << ");\n";
  out << q << "gemm_.write(" << cuda_identifier(g.c) << ", " << g.c_row << ", " << g.c_column << ", " << (g.accumulate ? "true" : "false") << ");\n";
  if (g.result_type != DType::f32) {
    out << q << "__syncthreads();\n";
    out << q << "// " << g.c << " is " << dtype_name(g.result_type) << ": rounded once, after the sum (as the scalar loop rounds it)\n";
    out << q << "for (int e_ = threadIdx.x; e_ < " << g.m * g.n << "; e_ += " << kThreads << ") {\n";
    out << q << "  float* const element_ = " << cuda_identifier(g.c) << " + (e_ / " << g.n << ") * " << g.c_row << "LL + (e_ % " << g.n << ") * "
        << g.c_column << "LL;\n";
    out << q << "  *element_ = " << round_function(g.result_type) << "(*element_);\n";
    out << q << "}\n";
  }
  out << p << "}\n";
  barrier(out, indent);
  return true;
}

// c (+)= a · b over whole buffers: on tensor cores when a and b are 16-bit tiles of one dtype and c
// is f32 (c[M,N], a[M,K] or [K,M], b[K,N] or [N,K]); a scalar loop otherwise.
}  // namespace solder::generic
