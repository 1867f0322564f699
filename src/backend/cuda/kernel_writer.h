// The generic writer of the CUDA code generator (internal to src/backend/cuda): every Kernel IR
// statement as block-cooperative CUDA, for every kernel the tensor-core emitter does not take.
//   kernel_writer.cpp          the kernel: signature, grid, tiles, statements, gemm
//   kernel_writer_memory.cpp   which threads touch what (block barriers only where needed), 16-byte
//                              vector staging plans
//   kernel_writer_reduce.cpp   reductions: cooperative (a thread group per point) and per point
//   kernel_writer_topk.cpp     top-k with a thread group per point
//   kernel_writer_row_copy.cpp maps that move data into whole rows, in 16-byte vectors
//   kernel_writer_registers.cpp  memory-bound kernels whose tiles stay in registers (the register pass)
//   kernel_writer_cluster.cpp  cluster collectives, through the device library (device/solder/cluster)
//   gemm_codegen.cpp           contractions and gemm on tensor cores (gemm_codegen.h)
// cuda_codegen.h describes what the generated code looks like; generate_cuda picks the writer.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_codegen.h"
#include "backend/cuda/cuda_expr.h"
#include "ir/diagnostics.h"
#include "ir/expr_visitor.h"
#include "ir/printer.h"

namespace solder::generic {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kVectorBatch = 8;  // 16-byte vectors each thread has in flight in a staging copy
inline constexpr int kMaxMergedReduces = 4;  // consecutive reduces computed in one cooperative pass
inline constexpr int kAsyncStages = 3;       // buffers of a tile staged by cp.async: this one and two ahead
// cp.async staging of stream tiles (async_staged) instead of the register prefetch: verified on the
// H100 but slower on variance V8 (56.4 vs 50.7 us) and faster on inertia I8 (223 vs 236 us); off until
// the occupancy it gets (3 x 16 KB tiles per block) is understood (bench/NOTES.md, reductions v2).
inline constexpr bool kAsyncStaging = false;

inline int64_t floor_pow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}


// `e` is a multiple of `v` whatever its variables' values (structurally: constants, products with a
// multiple, sums of multiples).
inline bool multiple_of(const Expr& e, int64_t v, const std::map<std::string, int64_t>& dims) {
  if (auto c = e.as<ConstNode>()) return c->is_integer && static_cast<int64_t>(c->value) % v == 0;
  if (auto d = e.as<DimRefNode>()) return dims.count(d->name) && dims.at(d->name) % v == 0;
  if (auto b = e.as<BinaryNode>()) {
    if (b->op == BinaryOp::mul) return multiple_of(b->lhs, v, dims) || multiple_of(b->rhs, v, dims);
    if (b->op == BinaryOp::add || b->op == BinaryOp::sub) return multiple_of(b->lhs, v, dims) && multiple_of(b->rhs, v, dims);
  }
  return false;
}

class KernelWriter {
 public:
  // What write() did with each reduce sum of a product, in writing order: block_gemm on the tensor
  // cores (its tile and, for the staged loop, its buffers), or the rule that kept it a scalar loop.
  struct ContractionChoice {
    std::string dst;              // the reduce's destination
    bool tensor_cores = false;
    DType type = DType::bf16;     // the mma input type
    int64_t m = 0, n = 0, k = 0;  // block_gemm's tile
    int stages = 0;               // the staged loop's buffers (0: one reduce on the float tiles)
    std::string refusal;
  };
  const std::vector<ContractionChoice>& contraction_choices() const { return contraction_choices_; }

  KernelWriter(const KernelProgram& program, const Kernel& kernel) : program_(program), kernel_(kernel) {
    printer_.dims = program.dims;
    printer_.array = [this](const std::string& name) -> const CudaArray* {
      auto it = arrays_.find(name);
      return it == arrays_.end() ? nullptr : &it->second;
    };
    for (size_t p = 0; p < program.globals.size(); ++p) {
      const GlobalTensor& g = program.globals[p];
      arrays_[g.name] = CudaArray{cuda_identifier(g.name), g.shape, g.dtype, true, static_cast<int>(p)};
    }
    int64_t offset = 0;
    for (auto& b : kernel.buffers) {
      if (b.scope == Scope::queue)
        throw Error("CUDA code generator: kernel '" + kernel.name + "' uses queue '" + b.name +
                    "'; queues are not supported by the CUDA backend yet (run it with --backend cpu)");
      arrays_[b.name] = CudaArray{cuda_identifier(b.name), b.shape, b.dtype, false};
    }
    // Tiles that only a contraction loop stages and reads live in its 16-bit buffers instead; the
    // register pass's point tiles live in registers.
    register_plan_ = plan_registers();
    std::set<std::string> staged = contraction_staged_tiles();
    if (register_plan_) {
      staged.insert(register_plan_->tiles.begin(), register_plan_->tiles.end());
      staged.insert(register_plan_->columns.begin(), register_plan_->columns.end());
    }
    for (auto& b : kernel.buffers) {
      if (staged.count(b.name)) continue;
      tile_offsets_.emplace_back(b.name, offset);
      offset += (b.elements() * 4 + 15) / 16 * 16;
    }
    // Tiles staged asynchronously (async_staged) get kAsyncStages - 1 more buffers.
    for (auto& name : async_buffers()) {
      const Buffer* b = kernel.find_buffer(name);
      for (int stage = 1; stage < kAsyncStages; ++stage) {
        stage_offsets_.emplace_back(name + "_stage" + std::to_string(stage), offset);
        offset += (b->elements() * 4 + 15) / 16 * 16;
      }
    }
    reduce_scratch_offset_ = offset;
    if (has_reduce()) offset += kThreads * 4 * kMaxMergedReduces;
    shared_bytes_ = plan_collectives(offset);  // the collectives' mailbox and scratch (kernel_writer_cluster.cpp)
    // The 16-bit staging buffers of contraction loops (gemm_codegen.cpp), last.
    contraction_offset_ = (shared_bytes_ + 127) / 128 * 128;
    if (int64_t bytes = contraction_staging_bytes()) shared_bytes_ = contraction_offset_ + bytes;
  }

  GeneratedKernel info() const {
    const int64_t blocks = register_plan_ && register_plan_->launch_blocks ? register_plan_->launch_blocks : kernel_.blocks();
    return GeneratedKernel{kernel_.name, blocks, kernel_.cluster, kThreads, shared_bytes_};
  }

  std::string write();

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  CudaExprPrinter printer_;
  std::map<std::string, CudaArray> arrays_;
  std::vector<std::pair<std::string, int64_t>> tile_offsets_;
  int64_t shared_bytes_ = 0, reduce_scratch_offset_ = 0;
  std::vector<std::pair<std::string, int64_t>> stage_offsets_;  // extra buffers of asynchronously staged tiles

  // ---- Block barriers ----------------------------------------------------------------------------
  // Element-wise loops give domain point p to thread p % blockDim. An access is *owned* when the
  // element it touches at point p has row-major offset p (the index is the domain's axes, in order,
  // over a buffer of the domain's shape): then only the element's own thread touches it. A statement
  // needs a barrier before it only when it touches something another thread touched since the last
  // barrier, and one of the two writes it.
  struct Touch {
    std::string name;
    bool write = false, owned = false;
  };
  struct Touched {
    bool written = false, foreign = false;
  };
  std::map<std::string, Touched> touched_;  // since the last barrier

  static bool owned_index(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes);
  Touch access_touch(const Access& a, bool write, const std::vector<Axis>& axes, bool by_point_thread = true) const {
    return Touch{a.name, write, by_point_thread && owned_index(a.index, array(a.name).shape, axes)};
  }
  // The loads of an expression, as reads (owned when at the point's own element).
  void expr_touches(const Expr& e, const std::vector<Axis>& axes, bool by_point_thread, std::vector<Touch>& touches) const;
  void index_touches(const Access& a, const std::vector<Axis>& axes, std::vector<Touch>& touches) const {
    for (auto& i : a.index) expr_touches(i, axes, true, touches);
  }
  void barrier(std::ostringstream& out, int indent);
  // A barrier when anything was touched since the last one (before statements whose threads the
  // ownership rule does not describe).
  void flush(std::ostringstream& out, int indent) {
    if (!touched_.empty()) barrier(out, indent);
  }
  // A barrier before `touches` when they conflict with what was touched since the last one; then
  // records them.
  void touch(std::ostringstream& out, int indent, const std::vector<Touch>& touches);
  static void merge(std::map<std::string, Touched>& into, const std::map<std::string, Touched>& from);

  bool has_reduce() const;
  bool has_topk() const;


  const CudaArray& array(const std::string& name) const { return arrays_.at(name); }
  static std::string pad(int indent) { return std::string(static_cast<size_t>(indent) * 2, ' '); }

  std::vector<std::string> index_texts(const std::vector<Expr>& index);
  // The index of an access; a data-dependent index of a global goes through solder_checked_index.
  std::vector<std::string> index_texts(const Access& a);
  // `true` when every index of `a` is in bounds (for globals: the clipping rule).
  std::string in_bounds(const CudaArray& a, const std::vector<std::string>& index) const;

  // Opens a block-strided loop over the points of `axes` (declaring each axis variable), with
  // `guard` skipping points; returns the indentation of the loop body.
  int open_domain(std::ostringstream& out, const std::vector<Axis>& axes, const Expr& guard, int indent, const std::string& label);

  // Writes `value` (float text, or integer text for an i32 target) to an access: globals are clipped and stored in their dtype, tiles
  // are rounded to theirs.
  // `integer_value`: `value` is integer text (long long or int), written exactly into an i32 target.
  void write_access(std::ostringstream& out, const Access& a, const std::string& value, int indent, bool integer_value = false);
  std::string read_access(const Access& a);

  void sync(std::ostringstream& out, int indent) { out << pad(indent) << "__syncthreads();\n"; }

  // A body: consecutive reduces over the same domain and reduce axes, none reading another's result,
  // become one cooperative pass (one read of their tiles, one combine); the rest one by one.
  void statements(std::ostringstream& out, const Block& body, int indent);
  static bool same_axes(const std::vector<Axis>& a, const std::vector<Axis>& b);
  bool mergeable(const ReduceNode& first, const ReduceNode& r, const std::vector<const ReduceNode*>& run) const;

  void statement(std::ostringstream& out, const Stmt& s, int indent);

  // ---- Staging copies with 16-byte vectors ----------------------------------------------------------
  // A copy between a global (f32, f16, bf16) and a tile whose last k domain axes walk both sides
  // contiguously: the innermost k - 1 axes cover their dims whole, the k-th is `base + axis` (base a
  // multiple of the vector), and the run they span, the global's row and the base are whole vectors.
  // Each thread then moves whole vectors, kVectorBatch of them loaded before any is stored. Bounds:
  // a global's vector is wholly in or out (its dims are whole vectors), checked at its first element.
  bool contiguous_run(const Access& a, const std::vector<Axis>& axes, size_t k, int64_t vector) const;

  struct VectorPlan {
    int64_t vector = 4, vectors = 0, batch = 1;  // elements per vector, vectors, vectors per thread in flight
  };
  std::optional<VectorPlan> vector_plan(const CopyNode& n) const;
  std::vector<Touch> vector_touches(const CopyNode& n) const;
  // One phase of a vector copy: the batch of vectors first + u * 256 (u < batch) of this thread,
  // loaded from the source into `regs`, or stored from `regs` into the destination.
  void vector_phase(std::ostringstream& out, const CopyNode& n, const VectorPlan& plan, const std::string& regs,
                    const std::string& first, bool load, int indent) {
    const auto& axes = n.domain.axes;
    const std::string v = std::to_string(plan.vector), p = pad(indent);
    auto element = [&](const Access& a) {
      const CudaArray& arr = array(a.name);
      return arr.pointer + " + " + printer_.offset(arr, index_texts(a));
    };
    out << p << "#pragma unroll\n";
    out << p << "for (int u_ = 0; u_ < " << plan.batch << "; ++u_) {\n";
    out << p << "  const int vec_ = " << first << " + u_ * " << kThreads << ";\n";
    out << p << "  if (vec_ >= " << plan.vectors << ") continue;\n";
    out << p << "  int rest_ = vec_ * " << v << ";\n";
    for (size_t d = axes.size(); d-- > 0;) {
      out << p << "  const long long " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << ";";
      out << " rest_ /= " << axes[d].extent << ";\n";
    }
    out << p << "  (void)rest_;\n";
    if (n.domain.guard) out << p << "  if (!" << printer_.print_bool(n.domain.guard) << ") continue;\n";
    const CudaArray& src = array(n.src.name);
    const CudaArray& dst = array(n.dst.name);
    if (load && src.global) {
      out << p << "  if (" << in_bounds(src, index_texts(n.src)) << ") solder::reduce::load_vector(" << element(n.src) << ", " << regs << "[u_]);\n";
      out << p << "  else for (int i_ = 0; i_ < " << v << "; ++i_) " << regs << "[u_][i_] = 0.0f;  // outside the global: 0\n";
    } else if (load) {
      out << p << "  solder::reduce::load_tile(" << element(n.src) << ", " << regs << "[u_]);\n";
    } else if (dst.global) {
      out << p << "  if (" << in_bounds(dst, index_texts(n.dst)) << ") solder::reduce::store_vector(" << element(n.dst) << ", " << regs << "[u_]);\n";
    } else {
      if (dst.dtype != DType::f32)
        out << p << "  for (int i_ = 0; i_ < " << v << "; ++i_) " << regs << "[u_][i_] = " << round_function(dst.dtype) << "(" << regs << "[u_][i_]);\n";
      out << p << "  solder::reduce::store_tile(" << element(n.dst) << ", " << regs << "[u_]);\n";
    }
    out << p << "}\n";
  }

  // A stream loop whose leading copies are staged by cp.async, kAsyncStages - 1 tiles ahead.
  void async_loop(std::ostringstream& out, const ForNode& n, size_t ahead, int indent) {
    const std::string v = cuda_identifier(n.var), begin = printer_.print_int(n.begin), end = printer_.print_int(n.end);
    auto slot_pointer = [&](const std::string& tile, const std::string& slot) {
      std::string e = cuda_identifier(tile + "_stage0");
      for (int stage = kAsyncStages - 1; stage >= 1; --stage)
        e = "(" + slot + " == " + std::to_string(stage) + " ? " + cuda_identifier(tile + "_stage" + std::to_string(stage)) + " : " + e + ")";
      return e;
    };
    std::set<std::string> tiles;
    for (size_t i = 0; i < ahead; ++i) tiles.insert(n.body[i].as<CopyNode>()->dst.name);
    // No thread may still read a staging buffer that the copies below overwrite.
    flush(out, indent);
    out << pad(indent) << "{  // the loop with its tiles staged by cp.async, " << kAsyncStages - 1 << " ahead\n";
    auto stage = [&](const std::string& iteration, const std::string& slot, int in) {
      out << pad(in) << "{ const long long next_ = " << iteration << "; const long long slot_ = " << slot << "; (void)slot_;\n";
      out << pad(in) << "  { const long long " << v << " = next_; if (" << v << " < " << end << ") {\n";
      for (size_t i = 0; i < ahead; ++i) {
        auto c = n.body[i].as<CopyNode>();
        std::string buffer = slot_pointer(c->dst.name, "slot_");
        async_phase(out, *c, *vector_plan(*c), buffer, in + 2);
      }
      out << pad(in) << "  } }\n";
      out << pad(in) << "  solder::reduce::cp_async_commit();\n";
      out << pad(in) << "}\n";
    };
    for (int s = 0; s < kAsyncStages - 1; ++s) stage(begin + " + " + std::to_string(s), std::to_string(s), indent);
    out << pad(indent) << "for (long long " << v << " = " << begin << "; " << v << " < " << end << "; ++" << v << ") {\n";
    auto before = touched_;
    const int in = indent + 1;
    out << pad(in) << "// the tiles of " << n.var << " + " << kAsyncStages - 1 << " into the buffers iteration " << n.var
        << " - 1 used (free since its last barrier); then wait for this iteration's\n";
    stage(v + " + " + std::to_string(kAsyncStages - 1), "(" + v + " - " + begin + " + " + std::to_string(kAsyncStages - 1) + ") % " + std::to_string(kAsyncStages), in);
    out << pad(in) << "solder::reduce::cp_async_wait<" << kAsyncStages - 1 << ">();\n";
    out << pad(in) << "{ const long long slot_ = (" << v << " - " << begin << ") % " << kAsyncStages << ";\n";
    for (auto& t : tiles) {
      std::string e = slot_pointer(t, "slot_");
      out << pad(in) << "  " << cuda_identifier(t) << " = " << e << ";\n";
    }
    out << pad(in) << "}\n";
    for (size_t i = 0; i < ahead; ++i) {
      auto c = n.body[i].as<CopyNode>();
      if (!c->comment.empty()) out << pad(in) << "// " << c->comment << " (staged by cp.async above)\n";
      touch(out, in, vector_touches(*c));
    }
    statements(out, Block(n.body.begin() + static_cast<std::ptrdiff_t>(ahead), n.body.end()), in);
    flush(out, in);
    out << pad(indent) << "}\n";
    out << pad(indent) << "solder::reduce::cp_async_wait<0>();  // nothing left in flight\n";
    out << pad(indent) << "}\n";
    touched_ = before;
  }

  bool vector_copy(std::ostringstream& out, const CopyNode& n, int indent) {
    auto plan = vector_plan(n);
    if (!plan) return false;
    touch(out, indent, vector_touches(n));
    const std::string p = pad(indent);
    out << p << "// " << plan->vectors << " vectors of " << plan->vector << " elements (16 bytes of " << n.src.name << " / " << n.dst.name
        << "), " << plan->batch << " in flight per thread\n";
    out << p << "for (int first_ = threadIdx.x; first_ < " << plan->vectors << "; first_ += " << kThreads * plan->batch << ") {\n";
    out << p << "  float staged_[" << plan->batch << "][" << plan->vector << "];\n";
    vector_phase(out, n, *plan, "staged_", "first_", true, indent + 1);
    vector_phase(out, n, *plan, "staged_", "first_", false, indent + 1);
    out << p << "}\n";
    return true;
  }

  // Staging copies at the top of a loop body that read an input at indices of the loop variable
  // alone (no loads): prefetched one iteration ahead into registers, so that the next tile's loads
  // are in flight while this one is computed. Returns how many leading statements qualify.
  size_t prefetchable(const ForNode& loop) const {
    size_t count = 0;
    for (auto& stmt : loop.body) {
      auto c = stmt.as<CopyNode>();
      if (!c) break;
      auto plan = vector_plan(*c);
      const GlobalTensor* g = program_.find_global(c->src.name);
      if (!plan || !g || g->role != GlobalRole::input || plan->vectors > kThreads * kVectorBatch) break;
      bool loads = false;
      for_each_load(c->domain.guard, [&](const LoadNode&) { loads = true; });
      for (auto& i : c->src.index) for_each_load(i, [&](const LoadNode&) { loads = true; });
      for (auto& i : c->dst.index) for_each_load(i, [&](const LoadNode&) { loads = true; });
      if (loads) break;
      ++count;
    }
    return count;
  }

  // Prefetched copies that cp.async can stage instead (f32 to an f32 tile, no guard): all of a
  // loop's or none. They rotate through kAsyncStages buffers, two tiles in flight ahead of the one
  // computed, in shared memory rather than registers.
  bool async_staged(const ForNode& loop) const {
    size_t ahead = prefetchable(loop);
    if (!kAsyncStaging || !ahead) return false;
    // The extra buffers must leave room: at most 160 KB of tiles (as float) in all.
    int64_t bytes = 0;
    for (auto& b : kernel_.buffers) bytes += b.elements() * 4;
    for (size_t i = 0; i < ahead; ++i) bytes += (kAsyncStages - 1) * kernel_.find_buffer(loop.body[i].as<CopyNode>()->dst.name)->elements() * 4;
    if (bytes > 160 * 1024) return false;
    for (size_t i = 0; i < ahead; ++i) {
      auto c = loop.body[i].as<CopyNode>();
      const CudaArray& src = array(c->src.name);
      const CudaArray& dst = array(c->dst.name);
      if (!src.global || dst.global || src.dtype != DType::f32 || dst.dtype != DType::f32 || c->domain.guard) return false;
    }
    return true;
  }
  std::set<std::string> async_buffers() const {
    struct Finder : StmtVisitor {
      const KernelWriter* self;
      std::set<std::string> names;
      using StmtVisitor::visit;
      void visit(const ForNode& loop) override {
        if (self->async_staged(loop))
          for (size_t i = 0; i < self->prefetchable(loop); ++i) names.insert(loop.body[i].as<CopyNode>()->dst.name);
        StmtVisitor::visit(loop);
      }
    } f;
    f.self = this;
    f.visit(kernel_.body);
    return f.names;
  }
  // The cp.async phase of a copy into the staging buffer `buffer` (an expression of a tile pointer).
  void async_phase(std::ostringstream& out, const CopyNode& n, const VectorPlan& plan, const std::string& buffer, int indent) {
    const auto& axes = n.domain.axes;
    const std::string p = pad(indent);
    const CudaArray& src = array(n.src.name);
    const CudaArray& dst = array(n.dst.name);
    out << p << "#pragma unroll\n";
    out << p << "for (int u_ = 0; u_ < " << plan.batch << "; ++u_) {\n";
    out << p << "  const int vec_ = threadIdx.x + u_ * " << kThreads << ";\n";
    out << p << "  if (vec_ >= " << plan.vectors << ") continue;\n";
    out << p << "  int rest_ = vec_ * " << plan.vector << ";\n";
    for (size_t d = axes.size(); d-- > 0;) {
      out << p << "  const long long " << cuda_identifier(axes[d].var) << " = rest_ % " << axes[d].extent << ";";
      out << " rest_ /= " << axes[d].extent << ";\n";
    }
    out << p << "  (void)rest_;\n";
    out << p << "  const bool inside_ = " << in_bounds(src, index_texts(n.src)) << ";\n";
    out << p << "  solder::reduce::cp_async16(" << buffer << " + " << printer_.offset(dst, index_texts(n.dst)) << ", inside_ ? "
        << src.pointer << " + " << printer_.offset(src, index_texts(n.src)) << " : " << src.pointer << ", inside_);\n";
    out << p << "}\n";
  }

  // ---- The register pass (kernel_writer_registers.cpp) -------------------------------------------
  // A kernel of top-level copies, maps, fills and reduces whose tiles of R rows × N elements are each
  // touched only at the point's own element (the "point tiles") keeps those tiles in registers: the
  // block's threads form R groups of G = 256 / R (one row each), and thread g of group r holds the
  // 16-byte vectors g, g + G, ... (V elements each) of row r of every point tile (R = 1: thread t
  // holds vectors t, t + 256, ... of the tile). Inputs load with 16-byte accesses straight into
  // registers, every map runs element by element there, a reduce over each row (R points, N elements
  // each) combines from registers (warp shuffles, then the group's warps through shared memory), and
  // stores are vectors (16 bytes; V bytes for 8-bit globals). Tiles of one row's N elements read at
  // the row's element ("column tiles": RMSNorm's weight when R > 1) are held the same way by every
  // group. Other tiles (a reduce's result, per-row values) stay in shared memory, written by fills,
  // reduces and per-row statements (maps and copies over the R rows, run as the generic writer does),
  // each followed by a block barrier.
  struct RegisterPlan {
    std::set<std::string> tiles;    // the point tiles (R × N elements)
    std::set<std::string> columns;  // the column tiles (N elements)
    std::set<const void*> row_statements;  // maps and copies over the R rows (shared tiles only)
    std::set<std::string> packed;   // 16-bit tiles kept as their loaded pairs (written only by that load);
                                    // 8-bit tiles kept as stored, 4 per word (one map writes them, only stores read them)
    int64_t elements = 0;           // R × N: a point tile's elements
    int64_t rows = 1, row = 0;      // R; N
    int64_t group = 256;            // G = 256 / R threads per row
    int64_t vector = 8;             // V
    int64_t vectors = 0, batch = 0;  // N / V vectors per row; vectors per thread
    // The pipelined form (row kernels over at least two waves of row blocks): 0, or the blocks
    // launched; each walks the row blocks b, b + gridDim.x, ... and issues the next one's loads
    // (`prefetched`: the copies from globals into register tiles) before this one's statements.
    int64_t launch_blocks = 0;
    int64_t blocks_per_sm = 0;      // resident together: __launch_bounds__'s minimum where above 1
    std::set<const void*> prefetched;
    std::set<const void*> hoisted;  // loads of column tiles that no grid coordinate moves: once, before the loop
  };
  std::optional<RegisterPlan> register_plan_;
  std::optional<RegisterPlan> plan_registers() const;
  int64_t plan_floats(const RegisterPlan& plan) const;
  bool register_owned(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes) const;
  // Declares the axes of element vec_ * V + i_ of a domain of N points (the last axis of extent > 1
  // moves within a vector): b_<axis>_ per vector, then each axis per element inside the i_ loop.
  void register_axes_base(std::ostringstream& out, const std::vector<Axis>& axes, int indent);
  void register_axes_element(std::ostringstream& out, const std::vector<Axis>& axes, int indent);
  void register_pass(std::ostringstream& out);
  bool register_statements(std::ostringstream& out);
  int register_open_vectors(std::ostringstream& out, const std::vector<Axis>& axes, bool column);
  void register_load(std::ostringstream& out, const CopyNode& c, const std::string& registers);
  // A map's divisions by a value that is the same for the whole row (row_divide.h): the divisors,
  // then their per-row setup before the vector loop (it also tells printer_ to print the divisions
  // by them as solder::reduce::divide_by_row).
  std::vector<Expr> row_divisors(const Expr& value, const std::vector<Axis>& axes);
  void row_divisor_setup(std::ostringstream& out, const std::vector<Expr>& divisors, const std::vector<Axis>& axes);
  int row_divisor_count_ = 0;
  void pipeline_row_blocks(RegisterPlan& plan) const;
  // Whether the register pass lets the next kernel launch early (a row kernel; SOLDER_ROW_LAUNCH_DEPENDENTS).
  bool launches_dependents_early() const;
  // `long long block_linear = <linear>;` and the grid's coordinates from it, at `indent`.
  void grid_coordinates(std::ostringstream& out, const std::string& linear, int indent) const;

 public:
  // Whether write() keeps this kernel's point tiles in registers (tests, the emit report).
  bool register_pass_used() const { return register_plan_.has_value(); }
  // The register pass's tile registers per thread (packed 16-bit pairs count half, packed 8-bit
  // words a quarter), 0 without the pass: the fusion tiler trades rows per block against it
  // (backend/cuda/fusion_params.h).
  int64_t register_floats() const;

 private:
  // ---- Cooperative reduces --------------------------------------------------------------------------
  // A sum / prod / max / min whose reduced extent is large gives each output point a group of threads
  // that splits the reduce axes, then combines the partials (f32 at each step; the order differs from
  // the executor's serial one). Two layouts:
  //   reduce-major (the tiles are contiguous along the reduce axis): G consecutive threads per point,
  //     combined by warp shuffles, then through shared memory when G spans several warps;
  //   point-major (contiguous along the domain): consecutive threads take consecutive points and the
  //     G = 256 / P' slices of each point are combined through shared memory.
  // A run of reduces over the same axes (statements()) is computed in one pass, one partial each.
  struct CooperativeLayout {
    bool point_major = false;
    int64_t points = 1, reduced = 1, group = 1, lanes_per_pass = 0;
    bool through_shared() const { return point_major || group > 32; }
  };

  // The layout of a run of reduces, or nothing when the generic path should run them.
  std::optional<CooperativeLayout> cooperative_layout(const std::vector<const ReduceNode*>& run) const;

  void cooperative_reduce(std::ostringstream& out, const std::vector<const ReduceNode*>& run, int indent);

  void reduce(std::ostringstream& out, const ReduceNode& n, int indent);
  // A top-k with a group of threads per point (kernel_writer_topk.cpp); false where it does not apply.
  bool cooperative_topk(std::ostringstream& out, const ReduceNode& n, int indent);

  // ---- Row copies in 16-byte vectors (kernel_writer_row_copy.cpp) -------------------------------
  // A map that only moves data into whole rows of a global: written with one 16-byte store per thread
  // and step, its 16-byte-pitched sources read as aligned 16-byte vectors; false where it does not apply
  // (or SOLDER_VECTOR_ROW_COPY=0), and the map is written one element per thread.
  bool row_copy(std::ostringstream& out, const MapNode& n, int indent);


  // ---- Contractions on tensor cores (gemm_codegen.h; written in gemm_codegen.cpp) -----------------
  struct ContractionLoop;
  int64_t contraction_offset_ = 0;  // the 16-bit staging buffers of contraction loops
  std::vector<ContractionChoice> contraction_choices_;
  std::optional<ContractionLoop> contraction_loop_plan(const ForNode& loop, std::string& why) const;
  int64_t contraction_staging_bytes() const;
  std::set<std::string> contraction_staged_tiles() const;
  // The staged loop form: written, true; or false (and, when the loop nearly qualified, a comment
  // saying why not), and the loop is written as usual.
  bool contraction_loop(std::ostringstream& out, const ForNode& loop, int indent);
  // One reduce on the float tiles: written, true; or false (a comment with the refusal when the
  // summand is a product), and the reduce is written as usual.
  bool contraction_reduce(std::ostringstream& out, const ReduceNode& n, int indent);

  // ---- Cluster collectives (kernel_writer_cluster.cpp) ---------------------------------------------
  // Each collective is one call of the device library (device/solder/cluster) on the tiles in place,
  // by every thread of every block of the cluster. All-reduces (cluster_reduce, all_exchange) whose tile
  // splits into whole 16-byte packets per group rank go through a reduce_channel compiled for their
  // shape; the other collectives through one communicator (a mailbox in dynamic shared memory). Both are
  // set up at the kernel's top and torn down at its end; gathers and reduce-scatters whose segments are
  // not whole packets go through a scratch area.
  struct CollectivePlan {
    struct Channel {
      int group = 0;
      int64_t tile_bytes = 0, offset = 0;
    };
    bool used = false;
    bool communicator = false;      // some collective goes through the communicator
    std::vector<Channel> channels;  // one per distinct (group, tile bytes) of the channel-served all-reduces
    int64_t mailbox_offset = 0, slot_bytes = 0, scratch_offset = 0, scratch_floats = 0;
    // The channel of an all-reduce of `tile_bytes` over groups of `group`, or -1 (the communicator).
    int channel_of(int group, int64_t tile_bytes) const;
  };
  CollectivePlan collectives_;
  bool has_collectives() const;
  // Lays out the mailbox, the channels and the scratch after `offset` (constructor); returns the new end.
  int64_t plan_collectives(int64_t offset);
  // One layout attempt: the end offset, or -1 when it does not fit (with_channels) or an error (without).
  int64_t lay_out_collectives(int64_t offset, bool with_channels);
  void collective_setup(std::ostringstream& out);     // top of the kernel: the channels and the communicator
  void collective_teardown(std::ostringstream& out);  // end of the kernel
  void collective(std::ostringstream& out, const Stmt& s, int indent);
};

}  // namespace solder::generic
