// The generic writer (kernel_writer.h): the register pass. A memory-bound kernel of top-level copies,
// maps, fills and reduces (SiLU·up, RMSNorm: no stream loop, no contraction) whose tiles of N
// elements are touched only at each point's own element keeps those tiles in registers instead of
// staging them through shared memory: thread t owns the 16-byte vectors t, t + 256, ... of every
// such tile, so one thread loads, computes and stores each element and no block barrier stands
// between the statements that touch them. What each statement computes is unchanged: the same
// expressions, rounded to the same dtypes; a reduce over the whole tile combines its partials in a
// different (fixed) order, as the cooperative reduces do.
#include <cstdlib>
#include <map>
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "backend/cuda/fusion_params.h"
#include "hw/hardware.h"
#include "ir/expr_visitor.h"

namespace solder::generic {

namespace {

int64_t points_of(const std::vector<Axis>& axes) {
  int64_t p = 1;
  for (auto& a : axes) p *= a.extent;
  return p;
}

std::vector<Axis> concat(const std::vector<Axis>& a, const std::vector<Axis>& b) {
  std::vector<Axis> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::string op_functor(ReduceOp op) {
  return op == ReduceOp::sum ? "solder::reduce::Sum()" : op == ReduceOp::prod ? "solder::reduce::Prod()"
         : op == ReduceOp::max ? "solder::reduce::Max()" : "solder::reduce::Min()";
}
std::string op_identity(ReduceOp op) {
  return op == ReduceOp::sum ? "0.0f" : op == ReduceOp::prod ? "1.0f" : op == ReduceOp::min ? "solder::infinity()" : "(-solder::infinity())";
}

constexpr int64_t kMaxRegisterFloats = 128;  // register tiles × vectors per thread × V, per thread (packed: half)
// Vectors of each tile per thread (all loaded before any is used): Q1's rows of 2560 at 8 rows per
// block take 10.
constexpr int64_t kMaxRegisterBatch = 16;
// Blocks per SM of a pipelined row kernel (pipeline_row_blocks); 0: not pipelined. Off by default: on
// the H100 one block per SM ran 10-40 % slower than one row block per block at quant_gemm Q8's, Q2's
// and Q3's rows and RMSNorm L1's (8 warps per SM hide too little of the per-element division and
// conversion; Q1's 2 % faster), two per SM 8 % faster at Q8's with the IEEE division (eleventh
// session); with the reciprocal division two per SM was slower at every row swept (twelfth session:
// Q8's +6 %, Q3's +11 %, Q1's 2.8× with 194 bytes of spills; bench/NOTES.md).
constexpr int64_t kRowBlocksPerSm = 0;
// Vectors per thread from which a map's divisions by a row value take the reciprocal form
// (row_divisors). On the H100 (bench/NOTES.md, twelfth session) it was 10 % faster at quant_gemm Q1's
// row (10 vectors per thread: the IEEE division's expansion held 80 registers, 3 blocks per SM and 1.29
// waves; the reciprocal form 63, 4 blocks per SM, one wave) and 1-5 % slower at Q8's, Q2's, Q3's and
// Q4's (6-8 vectors: 4 blocks per SM either way; in SASS one instruction more per element than the
// IEEE division's expansion, which spends a MUFU.RCP per element but only 11 instructions in all).
// Since long rows take 2 per block (group_plan.cpp, kLongRowsPerBlock) no suite cell's row kernel
// holds 9 vectors per thread (Q1's rows of 2560 hold 3, Q3's of 8192 8): the IEEE form everywhere by
// default, the reciprocal form with SOLDER_ROW_TILE=8 at Q1 or SOLDER_ROW_DIVIDE=reciprocal.
constexpr int64_t kReciprocalMinBatch = 9;

}  // namespace

// Owned up to axes of extent 1: dims of extent 1 are indexed by 0 (or an axis of extent 1), and the
// rest of the index is the remaining axes, in order, over dims of their extents.
bool KernelWriter::register_owned(const std::vector<Expr>& index, const std::vector<int64_t>& shape, const std::vector<Axis>& axes) const {
  if (index.size() != shape.size()) return false;
  std::vector<const Axis*> moving;
  std::set<std::string> unit;
  for (auto& a : axes) {
    if (a.extent == 1) unit.insert(a.var);
    else moving.push_back(&a);
  }
  size_t k = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    auto v = index[d].as<VarNode>();
    if (shape[d] == 1) {
      auto c = index[d].as<ConstNode>();
      if ((c && c->value == 0) || (v && unit.count(v->name))) continue;
      return false;
    }
    if (k >= moving.size() || !v || v->name != moving[k]->var || shape[d] != moving[k]->extent) return false;
    ++k;
  }
  return k == moving.size();
}

// The first i with axes[0, i) holding `rows` points (the row axes; the rest walk one row), or none.
static std::optional<size_t> row_split(const std::vector<Axis>& axes, int64_t rows) {
  int64_t p = 1;
  for (size_t i = 0; i <= axes.size(); ++i) {
    if (p == rows) return i;
    if (i < axes.size()) p *= axes[i].extent;
    if (p > rows) return std::nullopt;
  }
  return std::nullopt;
}

static std::vector<Axis> column_axes(const std::vector<Axis>& axes, int64_t rows) {
  auto i = row_split(axes, rows);
  return i ? std::vector<Axis>(axes.begin() + static_cast<std::ptrdiff_t>(*i), axes.end()) : std::vector<Axis>{};
}

static bool is_float8(DType d) { return d == DType::f8e4m3 || d == DType::f8e5m2; }

std::optional<KernelWriter::RegisterPlan> KernelWriter::plan_registers() const {
  if (kernel_.cluster > 1 || !contraction_staged_tiles().empty() || kernel_.body.empty()) return std::nullopt;
  RegisterPlan plan;
  plan.vector = 0;
  auto tile = [&](const std::string& name) -> const CudaArray* {
    auto it = arrays_.find(name);
    return it == arrays_.end() || it->second.global ? nullptr : &it->second;
  };
  auto index_reads = [](const Access& a) {
    for (auto& i : a.index)
      if (!tensors_used(i).empty()) return true;
    return false;
  };
  // Pass 0: the rows. Every reduce reduces R points (the rows) over N elements each; without a
  // reduce, R = 1 and N is the point tiles' size.
  for (auto& s : kernel_.body)
    if (auto r = s.as<ReduceNode>()) {
      const int64_t rows = points_of(r->domain.axes), row = points_of(r->reduce_axes);
      if (!plan.row) plan.rows = rows, plan.row = row;
      else if (plan.rows != rows || plan.row != row) return std::nullopt;
    }
  // One warp or more per row: R divides the block's 8 warps.
  if (plan.rows < 1 || plan.rows > kWarps || kWarps % plan.rows != 0) return std::nullopt;
  plan.group = kThreads / plan.rows;
  if (plan.row) plan.elements = plan.rows * plan.row;
  auto set_n = [&](int64_t n) {
    if (!plan.elements) plan.elements = n, plan.row = n;
    return plan.elements == n;
  };
  auto set_v = [&](int64_t v) {
    if (plan.vector && plan.vector != v) return false;
    plan.vector = v;
    return true;
  };
  // Pass 1: the statement kinds, N, V and the candidate point, column and per-row statements.
  std::set<std::string> shared_written;  // by fills, reduces and per-row statements
  std::vector<const CopyNode*> narrow_stores;  // point tiles into 8-bit globals: V elements per store
  for (auto& s : kernel_.body) {
    switch (s.kind()) {
      case StmtKind::Copy: {
        auto c = s.as<CopyNode>();
        const CudaArray& src = array(c->src.name);
        const CudaArray& dst = array(c->dst.name);
        if (src.global == dst.global) return std::nullopt;
        const int64_t points = points_of(c->domain.axes);
        const Access& g = src.global ? c->src : c->dst;
        const Access& t = src.global ? c->dst : c->src;
        if (points == plan.rows && plan.elements != plan.rows) {
          // A per-row copy (a statistic in or out): the generic statement, between barriers.
          plan.row_statements.insert(c);
          if (src.global) shared_written.insert(t.name);
          break;
        }
        if (index_reads(c->src) || index_reads(c->dst) || c->domain.axes.empty()) return std::nullopt;
        const CudaArray& global = array(g.name);
        const bool narrow_store = !src.global && is_float8(global.dtype);
        if (!narrow_store && global.dtype != DType::f32 && global.dtype != DType::f16 && global.dtype != DType::bf16) return std::nullopt;
        if (plan.rows > 1 && points == plan.row && src.global) {
          // A column tile: one row's N elements, the same in every row group.
          if (!set_v(16 / dtype_bytes(global.dtype)) || !contiguous_run(g, c->domain.axes, 1, plan.vector)) return std::nullopt;
          plan.columns.insert(t.name);
          break;
        }
        if (!set_n(points)) return std::nullopt;
        if (narrow_store) narrow_stores.push_back(c);
        else if (!set_v(16 / dtype_bytes(global.dtype)) || !contiguous_run(g, c->domain.axes, 1, plan.vector)) return std::nullopt;
        plan.tiles.insert(t.name);
        break;
      }
      case StmtKind::Map: {
        auto m = s.as<MapNode>();
        if (!tile(m->dst.name) || m->domain.axes.empty()) return std::nullopt;
        if (points_of(m->domain.axes) == plan.rows && plan.elements != plan.rows) {
          plan.row_statements.insert(m);
          shared_written.insert(m->dst.name);
          break;
        }
        if (index_reads(m->dst) || !set_n(points_of(m->domain.axes))) return std::nullopt;
        plan.tiles.insert(m->dst.name);
        break;
      }
      case StmtKind::Fill: shared_written.insert(s.as<FillNode>()->buffer); break;
      case StmtKind::Reduce: {
        auto r = s.as<ReduceNode>();
        if (r->op != ReduceOp::sum && r->op != ReduceOp::prod && r->op != ReduceOp::max && r->op != ReduceOp::min) return std::nullopt;
        if (!r->index_dst.name.empty() || r->reduce_axes.empty()) return std::nullopt;
        if (!tile(r->dst.name) || index_reads(r->dst)) return std::nullopt;
        shared_written.insert(r->dst.name);
        break;
      }
      default: return std::nullopt;
    }
  }
  // 8-bit stores take the plan's V (4, 8 or 16 elements: 4 to 16 bytes); a plan of them alone, 16.
  if (!plan.vector && !narrow_stores.empty()) plan.vector = 16;
  if (!plan.vector || plan.vector > 16 || !plan.row || plan.row % plan.vector != 0) return std::nullopt;
  for (auto c : narrow_stores)
    if (!contiguous_run(c->dst, c->domain.axes, 1, plan.vector)) return std::nullopt;
  // Pass 2: every point tile has R × N float elements and every column tile N, each touched only at
  // the point's own element; the other tiles are written only by fills, reduces and per-row statements.
  for (auto& name : plan.tiles) {
    const Buffer* b = kernel_.find_buffer(name);
    if (!b || b->elements() != plan.elements || b->dtype == DType::i32 || shared_written.count(name) || plan.columns.count(name))
      return std::nullopt;
  }
  for (auto& name : plan.columns) {
    const Buffer* b = kernel_.find_buffer(name);
    if (!b || b->elements() != plan.row || b->dtype == DType::i32 || shared_written.count(name)) return std::nullopt;
  }
  auto in_registers = [&](const std::string& name) { return plan.tiles.count(name) || plan.columns.count(name); };
  bool ok = true;
  // The element of a vector moves along the domain's last axis: it must hold whole vectors; the
  // leading axes hold the R rows.
  auto check_axes = [&](const std::vector<Axis>& axes) {
    if (axes.empty() || axes.back().extent % plan.vector != 0 || !row_split(axes, plan.rows)) ok = false;
  };
  auto check_loads = [&](const Expr& e, const std::vector<Axis>& axes) {
    if (!e) return;
    for_each_load(e, [&](const LoadNode& load) {
      for (auto& i : load.index)
        if (!tensors_used(i).empty()) ok = false;
      if (plan.tiles.count(load.tensor) && !register_owned(load.index, array(load.tensor).shape, axes)) ok = false;
      if (plan.columns.count(load.tensor) && !register_owned(load.index, array(load.tensor).shape, column_axes(axes, plan.rows))) ok = false;
    });
  };
  // A per-row statement reads and writes no register tile.
  auto check_shared_only = [&](const Expr& e) {
    if (e)
      for_each_load(e, [&](const LoadNode& load) {
        if (in_registers(load.tensor)) ok = false;
      });
  };
  for (auto& s : kernel_.body) {
    if (plan.row_statements.count(s.get())) {
      if (auto c = s.as<CopyNode>()) {
        if (in_registers(c->src.name) || in_registers(c->dst.name)) ok = false;
        check_shared_only(c->domain.guard);
        for (auto& i : c->src.index) check_shared_only(i);
        for (auto& i : c->dst.index) check_shared_only(i);
      } else if (auto m = s.as<MapNode>()) {
        if (in_registers(m->dst.name)) ok = false;
        check_shared_only(m->value);
        check_shared_only(m->domain.guard);
        for (auto& i : m->dst.index) check_shared_only(i);
      }
      continue;
    }
    if (auto c = s.as<CopyNode>()) {
      const Access& t = array(c->src.name).global ? c->dst : c->src;
      if (plan.columns.count(t.name)) {
        if (c->domain.axes.empty() || c->domain.axes.back().extent % plan.vector != 0) ok = false;
        check_loads(c->domain.guard, c->domain.axes);
        if (!register_owned(t.index, array(t.name).shape, c->domain.axes)) ok = false;
        continue;
      }
      check_axes(c->domain.axes);
      check_loads(c->domain.guard, c->domain.axes);
      if (!register_owned(t.index, array(t.name).shape, c->domain.axes)) ok = false;
    } else if (auto m = s.as<MapNode>()) {
      check_axes(m->domain.axes);
      check_loads(m->domain.guard, m->domain.axes);
      check_loads(m->value, m->domain.axes);
      if (!register_owned(m->dst.index, array(m->dst.name).shape, m->domain.axes)) ok = false;
    } else if (auto r = s.as<ReduceNode>()) {
      const auto axes = concat(r->domain.axes, r->reduce_axes);
      check_axes(axes);
      if (r->reduce_axes.back().extent % plan.vector != 0) ok = false;
      check_loads(r->value, axes);
      check_loads(r->where, axes);
      check_shared_only(r->domain.guard);  // per row: evaluated where the row's result is written
      if (in_registers(r->dst.name)) ok = false;
    } else if (auto f = s.as<FillNode>()) {
      if (in_registers(f->buffer)) ok = false;
    }
  }
  if (!ok) return std::nullopt;
  plan.vectors = plan.row / plan.vector;
  // At least half of each row's threads busy (fewer vectors leave most threads idle: the shared tiles
  // then let every thread compute).
  if (plan.vectors < plan.group / 2) return std::nullopt;
  plan.batch = (plan.vectors + plan.group - 1) / plan.group;
  // 16-bit tiles written only by their load from a global of their dtype stay packed (pairs).
  if (plan.vector == 8) {
    std::map<std::string, int> writers;
    std::set<std::string> loaded_same, stored;
    for (auto& s : kernel_.body) {
      if (plan.row_statements.count(s.get())) continue;
      if (auto c = s.as<CopyNode>()) {
        if (array(c->src.name).global) {
          ++writers[c->dst.name];
          if (array(c->src.name).dtype == kernel_.find_buffer(c->dst.name)->dtype) loaded_same.insert(c->dst.name);
        } else {
          stored.insert(c->src.name);
        }
      } else if (auto m = s.as<MapNode>()) {
        ++writers[m->dst.name];
      }
    }
    for (auto* set : {&plan.tiles, &plan.columns})
      for (auto& t : *set) {
        const DType d = kernel_.find_buffer(t)->dtype;
        if ((d == DType::bf16 || d == DType::f16) && writers[t] == 1 && loaded_same.count(t) && !stored.count(t)) plan.packed.insert(t);
      }
  }
  // 8-bit tiles written by one map and read only by their stores into globals of their dtype stay
  // packed as those stores write them (`packed` too; the dtype tells them from 16-bit pairs): 4
  // elements per word, converted once by the map with the store's conversion (the map's rounding to
  // the dtype and the store's are the same cvt, and a value of the dtype converts to itself), a
  // quarter of the f32 tile's registers (quant_gemm's aq: 16 words per thread at Q5, was 64 floats).
  if (plan.vector % 4 == 0) {
    std::map<std::string, int> map_writers;
    std::set<std::string> loaded, read, stored_same, stored_other;
    auto reads = [&](const Expr& e) {
      if (e) for_each_load(e, [&](const LoadNode& load) { read.insert(load.tensor); });
    };
    for (auto& s : kernel_.body) {
      if (auto c = s.as<CopyNode>()) {
        reads(c->domain.guard);
        if (array(c->src.name).global) loaded.insert(c->dst.name);
        else if (const Buffer* b = kernel_.find_buffer(c->src.name))
          (array(c->dst.name).dtype == b->dtype ? stored_same : stored_other).insert(c->src.name);
      } else if (auto m = s.as<MapNode>()) {
        ++map_writers[m->dst.name];
        reads(m->value);
        reads(m->domain.guard);
      } else if (auto r = s.as<ReduceNode>()) {
        reads(r->value);
        reads(r->where);
        reads(r->domain.guard);
      }
    }
    for (auto& t : plan.tiles)
      if (is_float8(kernel_.find_buffer(t)->dtype) && map_writers[t] == 1 && !loaded.count(t) && !read.count(t) &&
          stored_same.count(t) && !stored_other.count(t))
        plan.packed.insert(t);
  }
  if (plan.batch > kMaxRegisterBatch || plan_floats(plan) > kMaxRegisterFloats) return std::nullopt;
  pipeline_row_blocks(plan);
  return plan;
}

// With SOLDER_ROW_BLOCKS_PER_SM=N > 0 (kRowBlocksPerSm: 0, off), a row kernel (a reduce per row) over
// more row blocks than N blocks per SM runs pipelined: N blocks per SM, each walking its row blocks
// with the next one's loads in flight. Without it, a grid of one wave loads, reduces and stores in
// lockstep: every block waits for all its loads, then computes with the memory idle, then stores. Taken where every load into a register tile can be issued a row block early (a copy
// from a global the kernel does not write, the tile's only writer) and the next row block's
// registers fit the budget beside the plan's.
void KernelWriter::pipeline_row_blocks(RegisterPlan& plan) const {
  int64_t per_sm = kRowBlocksPerSm;
  if (const char* env = std::getenv("SOLDER_ROW_BLOCKS_PER_SM"); env && *env) per_sm = std::atoll(env);  // A/B runs (docs/runtime.md)
  if (per_sm <= 0 || kernel_.grid.empty() || !has_reduce()) return;
  const int64_t sms = default_hardware().sm_count > 0 ? default_hardware().sm_count : 132;
  const int64_t tiles = kernel_.blocks(), target = per_sm * sms;
  if (tiles <= target) return;  // one row block per launched block at most: nothing to overlap
  std::set<std::string> written;  // globals the kernel stores into
  std::map<std::string, int> writers;  // of each register tile
  for (auto& s : kernel_.body)
    if (auto c = s.as<CopyNode>()) {
      if (array(c->dst.name).global) written.insert(c->dst.name);
      else ++writers[c->dst.name];
    } else if (auto m = s.as<MapNode>()) {
      ++writers[m->dst.name];
    }
  auto moves_with_grid = [&](const CopyNode& c) {
    for (auto& g : kernel_.grid) {
      for (auto& i : c.src.index)
        if (uses_var(i, g.var)) return true;
      if (c.domain.guard && uses_var(c.domain.guard, g.var)) return true;
    }
    return false;
  };
  std::set<const void*> prefetched, hoisted;
  int64_t floats = plan_floats(plan);
  for (auto& s : kernel_.body) {
    auto c = s.as<CopyNode>();
    if (!c || plan.row_statements.count(s.get()) || !array(c->src.name).global) continue;
    const std::string& t = c->dst.name;
    if (!plan.tiles.count(t) && !plan.columns.count(t)) continue;
    if (written.count(c->src.name) || writers[t] != 1) return;
    if (plan.columns.count(t) && !moves_with_grid(*c)) {
      hoisted.insert(s.get());  // the same elements for every row block
      continue;
    }
    prefetched.insert(s.get());
    const int64_t per_register = !plan.packed.count(t) ? 1 : is_float8(kernel_.find_buffer(t)->dtype) ? 4 : 2;
    floats += plan.batch * plan.vector / per_register;
  }
  if (prefetched.empty() || floats > kMaxRegisterFloats) return;
  const int64_t per_block = (tiles + target - 1) / target;
  plan.launch_blocks = (tiles + per_block - 1) / per_block;
  plan.blocks_per_sm = per_sm;
  plan.prefetched = std::move(prefetched);
  plan.hoisted = std::move(hoisted);
}

// A row kernel (a reduce per row) lets the next kernel start as soon as its own last blocks have started
// (launch_dependents, device/solder/reduce/vector.cuh): the GEMM skeleton that follows quant_gemm's and
// rmsnorm_gemm's row kernels with a programmatic launch (kProgrammaticLaunchMaxUs) then sets up its blocks
// (barriers, tensor maps) on the SMs the row blocks leave, and waits for the row kernel's completion before
// its first load. Without it the GEMM's blocks start only once every row block has exited.
// SOLDER_ROW_LAUNCH_DEPENDENTS=0 leaves it out (A/B runs, docs/runtime.md).
bool KernelWriter::launches_dependents_early() const {
  if (const char* env = std::getenv("SOLDER_ROW_LAUNCH_DEPENDENTS"); env && *env) return std::atoll(env) != 0;
  return has_reduce();
}

// Per thread: packed tiles count half (16-bit pairs) or a quarter (8-bit).
int64_t KernelWriter::plan_floats(const RegisterPlan& plan) const {
  int64_t floats = 0;
  for (auto* set : {&plan.tiles, &plan.columns})
    for (auto& t : *set) {
      const int64_t per_register = !plan.packed.count(t) ? 1 : is_float8(kernel_.find_buffer(t)->dtype) ? 4 : 2;
      floats += plan.batch * plan.vector / per_register;
    }
  return floats;
}

int64_t KernelWriter::register_floats() const { return register_plan_ ? plan_floats(*register_plan_) : 0; }

void KernelWriter::register_axes_base(std::ostringstream& out, const std::vector<Axis>& axes, int indent) {
  out << pad(indent) << "int rest_ = vec_ * " << register_plan_->vector << ";\n";
  for (size_t d = axes.size(); d-- > 0;) {
    out << pad(indent) << "const int b_" << cuda_identifier(axes[d].var) << "_ = rest_ % " << axes[d].extent << ";";
    out << " rest_ /= " << axes[d].extent << ";\n";
  }
  out << pad(indent) << "(void)rest_;\n";
}

void KernelWriter::register_axes_element(std::ostringstream& out, const std::vector<Axis>& axes, int indent) {
  for (size_t d = 0; d < axes.size(); ++d) {
    const std::string id = cuda_identifier(axes[d].var);
    out << pad(indent) << "const long long " << id << " = b_" << id << "_" << (d + 1 == axes.size() ? " + i_" : "") << "; (void)" << id << ";\n";
  }
}

namespace {

std::string register_name(const std::string& tile) { return "reg_" + cuda_identifier(tile); }
std::string prefetch_name(const std::string& tile) { return "next_" + cuda_identifier(tile); }

// `text` with `extra` more levels of indentation on each line.
std::string indented(const std::string& text, int extra) {
  std::string out, prefix(static_cast<size_t>(extra) * 2, ' ');
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out += prefix;
    out += text.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

}  // namespace

// Opens the per-vector loop (indent 2 inside); returns the body's indentation. A column tile's
// vector is the row's vector j_; a point tile's is row_ * vectors + j_.
int KernelWriter::register_open_vectors(std::ostringstream& out, const std::vector<Axis>& axes, bool column) {
  const RegisterPlan& plan = *register_plan_;
  out << "  #pragma unroll\n";
  out << "  for (int u_ = 0; u_ < " << plan.batch << "; ++u_) {\n";
  out << "    const int j_ = lane_ + u_ * " << plan.group << ";\n";
  out << "    if (j_ >= " << plan.vectors << ") continue;\n";
  if (column || plan.rows == 1) out << "    const int vec_ = j_;\n";
  else out << "    const int vec_ = row_ * " << plan.vectors << " + j_;\n";
  register_axes_base(out, axes, 2);
  return 2;
}

// A copy from a global into a register tile, 16-byte vectors into `registers` (the tile's registers,
// or the pipelined form's next ones), at indent 1.
void KernelWriter::register_load(std::ostringstream& out, const CopyNode& c, const std::string& registers) {
  const RegisterPlan& plan = *register_plan_;
  const Access& g = c.src;
  const Access& t = c.dst;
  const CudaArray& global = array(g.name);
  const Buffer* tb = kernel_.find_buffer(t.name);
  const auto& axes = c.domain.axes;
  const bool column = plan.columns.count(t.name) > 0;
  const std::string V = std::to_string(plan.vector);
  out << "  // copy " << c.dst.name << " = " << c.src.name << ": " << plan.vector * dtype_bytes(global.dtype) << "-byte vectors, into registers"
      << (column ? " (in every row)" : "") << "\n";
  int in = register_open_vectors(out, axes, column);
  if (plan.packed.count(t.name)) {
    // Kept as the loaded 16-bit pairs (the tile's dtype is the global's: no rounding).
    out << pad(in) << "{\n";
    out << pad(in + 1) << "const int i_ = 0;\n";
    register_axes_element(out, axes, in + 1);
    out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::load_packed(" << global.pointer << " + "
        << printer_.offset(global, index_texts(g)) << ", " << registers << "[u_]);\n";
    out << pad(in + 1) << "else solder::reduce::zero_packed(" << registers << "[u_]);  // outside the global: 0\n";
    out << pad(in) << "}\n";
  } else {
    // The vector is wholly in or out of the global (its dims are whole vectors); a guard does
    // not hold the load back (an element it skips is never read).
    out << pad(in) << "{\n";
    out << pad(in + 1) << "const int i_ = 0;\n";
    register_axes_element(out, axes, in + 1);
    out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::load_vector(" << global.pointer << " + "
        << printer_.offset(global, index_texts(g)) << ", " << registers << "[u_]);\n";
    out << pad(in + 1) << "else for (int j_ = 0; j_ < " << V << "; ++j_) " << registers << "[u_][j_] = 0.0f;  // outside the global: 0\n";
    out << pad(in) << "}\n";
    if (tb->dtype != DType::f32 && tb->dtype != global.dtype)
      out << pad(in) << "for (int j_ = 0; j_ < " << V << "; ++j_) " << registers << "[u_][j_] = " << round_function(tb->dtype) << "("
          << registers << "[u_][j_]);\n";
  }
  out << "  }\n";
}

void KernelWriter::register_pass(std::ostringstream& out) {
  const RegisterPlan& plan = *register_plan_;
  const std::string B = std::to_string(plan.batch), G = std::to_string(plan.group);
  if (plan.rows == 1)
    out << "  // the register pass: " << plan.elements << " elements of each point tile per block, " << plan.batch
        << " vectors of " << plan.vector << " per thread (vector v of a tile in thread v % " << kThreads << ")\n";
  else
    out << "  // the register pass: " << plan.rows << " rows of " << plan.row << " elements per block, one row per " << plan.group
        << " threads, " << plan.batch << " vectors of " << plan.vector << " per thread (vector v of row r in thread r * " << G << " + v % "
        << G << ")\n";
  out << "  const int row_ = threadIdx.x / " << G << ", lane_ = threadIdx.x % " << G << ";\n";
  out << "  (void)row_;\n";
  if (launches_dependents_early())
    out << "  // the next kernel (a GEMM skeleton's programmatic launch) may take each SM this grid's blocks leave\n"
        << "  solder::reduce::launch_dependents();\n";
  // The registers of a tile: its type and the extent of a vector's entry.
  auto registers_of = [&](const std::string& t) -> std::pair<std::string, int64_t> {
    if (plan.packed.count(t) && is_float8(kernel_.find_buffer(t)->dtype)) return {"unsigned int", plan.vector / 4};
    if (plan.packed.count(t)) return {kernel_.find_buffer(t)->dtype == DType::bf16 ? "__nv_bfloat162" : "__half2", plan.vector / 2};
    return {"float", plan.vector};
  };
  for (auto* set : {&plan.tiles, &plan.columns})
    for (auto& t : *set) {
      const std::string what = t + (set == &plan.columns ? ": one row's elements, the same in every row" : "");
      const auto [type, entry] = registers_of(t);
      if (plan.packed.count(t) && is_float8(kernel_.find_buffer(t)->dtype)) {
        out << "  " << type << " " << register_name(t) << "[" << B << "][" << entry << "] = {};  // " << what << ", as stored (8-bit, 4 per word)\n";
        arrays_[t].element = "/* " + t + ": packed 8-bit, read only by its store */";
      } else if (plan.packed.count(t)) {
        out << "  " << type << " " << register_name(t) << "[" << B << "][" << entry << "];  // " << what << ", as loaded (16-bit pairs)\n";
        arrays_[t].element = "solder::reduce::unpack(" + register_name(t) + "[u_], i_)";
      } else {
        out << "  " << type << " " << register_name(t) << "[" << B << "][" << entry << "] = {};  // " << what << "\n";
        arrays_[t].element = register_name(t) + "[u_][i_]";
      }
    }
  if (!plan.launch_blocks) {
    register_statements(out);
  } else {
    // The pipelined form: block b walks the row blocks b, b + gridDim.x, ...; the loads of the next
    // one are issued before this one's reduce, maps and stores, so that they are in flight while
    // this one computes and stores.
    const int64_t tiles = kernel_.blocks();
    std::vector<const CopyNode*> loads;
    for (auto& s : kernel_.body)
      if (plan.prefetched.count(s.get())) loads.push_back(s.as<CopyNode>());
    out << "  // pipelined: " << plan.launch_blocks << " blocks walk the " << tiles << " row blocks (b, b + gridDim.x, ...); the next one's "
        << "loads are in flight while this one reduces, computes and stores\n";
    for (auto c : loads) {
      const auto [type, entry] = registers_of(c->dst.name);
      out << "  " << type << " " << prefetch_name(c->dst.name) << "[" << B << "][" << entry << "];  // " << c->dst.name
          << " of the next row block\n";
    }
    auto prefetch = [&](const std::string& linear, int indent) {
      std::ostringstream loads_text;
      for (auto c : loads) register_load(loads_text, *c, prefetch_name(c->dst.name));
      grid_coordinates(out, linear, indent);
      out << pad(indent) << "(void)block_linear;\n";
      out << indented(loads_text.str(), indent - 1);
    };
    for (auto& s : kernel_.body)
      if (plan.hoisted.count(s.get())) {
        auto c = s.as<CopyNode>();
        out << "  // " << c->dst.name << ": the same for every row block, loaded once\n";
        register_load(out, *c, register_name(c->dst.name));
      }
    out << "  {  // the first row block's loads\n";
    prefetch("blockIdx.x", 2);
    out << "  }\n";
    out << "  for (long long tile_ = blockIdx.x; tile_ < " << tiles << "LL; tile_ += gridDim.x) {\n";
    grid_coordinates(out, "tile_", 2);
    out << "    (void)block_linear;\n";
    for (auto c : loads) {
      const auto entry = registers_of(c->dst.name).second;
      out << "    #pragma unroll\n";
      out << "    for (int u_ = 0; u_ < " << B << "; ++u_)\n";
      out << "      for (int w_ = 0; w_ < " << entry << "; ++w_) " << register_name(c->dst.name) << "[u_][w_] = " << prefetch_name(c->dst.name)
          << "[u_][w_];\n";
    }
    out << "    if (tile_ + gridDim.x < " << tiles << "LL) {  // the next row block's loads\n";
    prefetch("tile_ + gridDim.x", 3);
    out << "    }\n";
    std::ostringstream body;
    if (register_statements(body)) body << "  __syncthreads();  // the shared tiles free for the next row block\n";
    out << indented(body.str(), 1);
    out << "  }\n";
  }
  for (auto& t : plan.tiles) arrays_[t].element.clear();
  for (auto& t : plan.columns) arrays_[t].element.clear();
}

// The divisors of `value`'s real divisions that are the same for a whole row of the map's domain
// `axes` (their text, once each): expressions of the row axes (the leading axes holding the R rows),
// axes of extent 1, the grid's coordinates and constants, reading only shared tiles — never a register tile (per
// element) nor a global (the setup reads them outside the map's guard). None where the thread holds
// fewer than kReciprocalMinBatch vectors; SOLDER_ROW_DIVIDE=ieee / reciprocal forces either form (A/B
// runs, docs/runtime.md).
std::vector<Expr> KernelWriter::row_divisors(const Expr& value, const std::vector<Axis>& axes) {
  std::vector<Expr> found;
  const RegisterPlan& plan = *register_plan_;
  const char* env = std::getenv("SOLDER_ROW_DIVIDE");
  const std::string form = env ? env : "";
  if (form == "ieee" || (form != "reciprocal" && plan.batch < kReciprocalMinBatch)) return found;
  const auto split = row_split(axes, plan.rows);
  if (!split) return found;
  std::set<std::string> row_vars;
  for (size_t d = 0; d < axes.size(); ++d)
    if (d < *split || axes[d].extent == 1) row_vars.insert(axes[d].var);  // an axis of extent 1 is 0 throughout
  for (auto& g : kernel_.grid) row_vars.insert(g.var);
  struct Scan : ExprVisitor {
    KernelWriter* writer = nullptr;
    const RegisterPlan* plan = nullptr;
    const std::set<std::string>* row_vars = nullptr;
    std::vector<Expr>* found = nullptr;
    std::set<std::string> seen;
    using ExprVisitor::visit;
    bool row_invariant(const Expr& e) const {
      for (auto& v : vars_used(e))
        if (!row_vars->count(v)) return false;
      bool ok = true;
      for_each_load(e, [&](const LoadNode& load) {
        if (writer->array(load.tensor).global || plan->tiles.count(load.tensor) || plan->columns.count(load.tensor)) ok = false;
      });
      return ok;
    }
    void visit(const BinaryNode& b) override {
      ExprVisitor::visit(b);
      if (b.op != BinaryOp::div || !row_invariant(b.rhs)) return;
      const std::string key = writer->printer_.print_float(b.rhs);
      if (seen.insert(key).second) found->push_back(b.rhs);
    }
  } scan;
  scan.writer = this;
  scan.plan = &plan;
  scan.row_vars = &row_vars;
  scan.found = &found;
  scan.visit(value);
  return found;
}

// Before a map's vector loop: each row divisor evaluated once, at the thread's row (its first vector),
// with its reciprocal (solder::reduce::row_divisor); the map's divisions by it then print as
// solder::reduce::divide_by_row, the IEEE quotient bit for bit (device/solder/reduce/row_divide.h).
void KernelWriter::row_divisor_setup(std::ostringstream& out, const std::vector<Expr>& divisors, const std::vector<Axis>& axes) {
  printer_.row_divisors.clear();
  if (divisors.empty()) return;
  const RegisterPlan& plan = *register_plan_;
  std::vector<std::string> names, texts;
  for (size_t i = 0; i < divisors.size(); ++i) {
    names.push_back("divisor" + std::to_string(row_divisor_count_++) + "_");
    texts.push_back(printer_.print_float(divisors[i]));
    out << "  solder::reduce::RowDivisor " << names.back() << ";  // " << texts.back()
        << ": the same for the whole row, its reciprocal once (the IEEE quotient bit for bit)\n";
  }
  out << "  {\n";
  out << "    const int vec_ = " << (plan.rows == 1 ? std::string("0") : "row_ * " + std::to_string(plan.vectors)) << ";\n";
  register_axes_base(out, axes, 2);
  out << "    const int i_ = 0;\n";
  register_axes_element(out, axes, 2);
  for (size_t i = 0; i < divisors.size(); ++i) out << "    " << names[i] << " = solder::reduce::row_divisor(" << texts[i] << ");\n";
  out << "  }\n";
  for (size_t i = 0; i < divisors.size(); ++i) printer_.row_divisors[texts[i]] = names[i];
}

// The statements of the register pass, at indent 1 (the prefetched loads of the pipelined form
// left out); returns whether a shared tile was touched since the last barrier.
bool KernelWriter::register_statements(std::ostringstream& out) {
  const RegisterPlan& plan = *register_plan_;
  const std::string V = std::to_string(plan.vector);
  auto reg = [](const std::string& tile) { return register_name(tile); };
  auto open_vectors = [&](const std::vector<Axis>& axes, bool column = false) { return register_open_vectors(out, axes, column); };
  auto close = [&](int indent) { out << pad(indent) << "}\n"; };
  // Whether a statement since the last barrier touched a shared tile (a fill then needs one first).
  bool shared_touched = false;
  auto reads_shared = [&](const Expr& e) {
    if (e)
      for_each_load(e, [&](const LoadNode& load) {
        if (!array(load.tensor).global && !plan.tiles.count(load.tensor) && !plan.columns.count(load.tensor)) shared_touched = true;
      });
  };
  for (auto& s : kernel_.body) {
    if (plan.row_statements.count(s.get())) {
      // A per-row statement (a map or copy over the R rows, shared tiles and globals only): the generic
      // statement, after a barrier when a shared tile was touched since the last one, then a barrier.
      if (shared_touched) out << "  __syncthreads();\n";
      touched_.clear();
      statement(out, s, 1);
      touched_.clear();
      auto c = s.as<CopyNode>();
      if (c && array(c->dst.name).global) {
        shared_touched = true;  // it read a shared tile; nothing it wrote is read in this kernel
      } else {
        out << "  __syncthreads();  // the per-row values for every thread\n";
        shared_touched = false;
      }
      continue;
    }
    if (!s.get()->comment.empty()) out << "  // " << s.get()->comment << "\n";
    switch (s.kind()) {
      case StmtKind::Copy: {
        auto c = s.as<CopyNode>();
        if (plan.prefetched.count(s.get()) || plan.hoisted.count(s.get())) {
          out << "  // copy " << c->dst.name << " = " << c->src.name << ": loaded before ("
              << (plan.hoisted.count(s.get()) ? "once, before the row blocks" : "the next row block's loads") << ")\n";
          break;
        }
        reads_shared(c->domain.guard);
        const bool load = array(c->src.name).global;
        if (load) {
          register_load(out, *c, reg(c->dst.name));
          break;
        }
        const Access& g = c->dst;
        const Access& t = c->src;
        const CudaArray& global = array(g.name);
        const Buffer* tb = kernel_.find_buffer(t.name);
        const auto& axes = c->domain.axes;
        const bool column = plan.columns.count(t.name) > 0;
        out << "  // copy " << c->dst.name << " = " << c->src.name << ": " << plan.vector * dtype_bytes(global.dtype) << "-byte vectors, "
            << "from registers" << (column ? " (in every row)" : "") << "\n";
        int in = open_vectors(axes, column);
        // A vector store when every element's guard holds, else element by element.
        out << pad(in) << "bool whole_ = true;\n";
        if (c->domain.guard) {
          out << pad(in) << "#pragma unroll\n";
          out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
          register_axes_element(out, axes, in + 1);
          out << pad(in + 1) << "whole_ = whole_ && " << printer_.print_bool(c->domain.guard) << ";\n";
          out << pad(in) << "}\n";
        }
        out << pad(in) << "if (whole_) {\n";
        out << pad(in + 1) << "const int i_ = 0;\n";
        register_axes_element(out, axes, in + 1);
        const bool narrow = plan.packed.count(t.name) && is_float8(tb->dtype);  // its bytes, as packed
        if (narrow)
          out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::store_packed_fp8(reinterpret_cast<unsigned char*>("
              << global.pointer << " + " << printer_.offset(global, index_texts(g)) << "), " << reg(t.name) << "[u_]);\n";
        else
          out << pad(in + 1) << "if (" << in_bounds(global, index_texts(g)) << ") solder::reduce::store_vector(" << global.pointer << " + "
              << printer_.offset(global, index_texts(g)) << ", " << reg(t.name) << "[u_]);\n";
        out << pad(in) << "} else {\n";
        out << pad(in + 1) << "#pragma unroll\n";
        out << pad(in + 1) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
        register_axes_element(out, axes, in + 2);
        if (c->domain.guard) out << pad(in + 2) << "if (!" << printer_.print_bool(c->domain.guard) << ") continue;\n";
        auto idx = index_texts(g);
        if (narrow)
          out << pad(in + 2) << "if (" << in_bounds(global, idx) << ") solder::reduce::store_packed_fp8_element(reinterpret_cast<unsigned char*>(&"
              << global.pointer << "[" << printer_.offset(global, idx) << "]), " << reg(t.name) << "[u_], i_);\n";
        else
          out << pad(in + 2) << "if (" << in_bounds(global, idx) << ") solder::store(&" << global.pointer << "[" << printer_.offset(global, idx)
              << "], " << reg(t.name) << "[u_][i_]);\n";
        out << pad(in + 1) << "}\n";
        out << pad(in) << "}\n";
        close(1);
        break;
      }
      case StmtKind::Map: {
        auto m = s.as<MapNode>();
        reads_shared(m->value);
        reads_shared(m->domain.guard);
        const auto& axes = m->domain.axes;
        const Buffer* b = kernel_.find_buffer(m->dst.name);
        const bool narrow = plan.packed.count(m->dst.name) && is_float8(b->dtype);
        out << "  // " << m->dst.name << " element by element, in registers" << (narrow ? " (packed as its store writes it)" : "") << "\n";
        const auto divisors = row_divisors(m->value, axes);
        row_divisor_setup(out, divisors, axes);
        int in = open_vectors(axes);
        if (narrow) out << pad(in) << "float v_[" << V << "] = {};\n";
        out << pad(in) << "#pragma unroll\n";
        out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
        register_axes_element(out, axes, in + 1);
        if (m->domain.guard) out << pad(in + 1) << "if (!" << printer_.print_bool(m->domain.guard) << ") continue;\n";
        if (narrow)  // rounded to the dtype by the conversion below, the one the store would make
          out << pad(in + 1) << "v_[i_] = " << printer_.print_float(m->value) << ";\n";
        else
          out << pad(in + 1) << reg(m->dst.name) << "[u_][i_] = " << round_function(b->dtype) << "(" << printer_.print_float(m->value) << ");\n";
        out << pad(in) << "}\n";
        if (narrow)
          out << pad(in) << "solder::reduce::pack_fp8<" << V << ">(v_, " << reg(m->dst.name) << "[u_], "
              << (b->dtype == DType::f8e4m3 ? "__NV_SATFINITE, __NV_E4M3" : "__NV_NOSAT, __NV_E5M2") << ");\n";
        close(1);
        printer_.row_divisors.clear();
        break;
      }
      case StmtKind::Fill: {
        auto f = s.as<FillNode>();
        const Buffer* b = kernel_.find_buffer(f->buffer);
        if (shared_touched) out << "  __syncthreads();  // no thread still reads " << f->buffer << "\n";
        out << "  for (int e = threadIdx.x; e < " << b->elements() << "; e += blockDim.x) " << cuda_identifier(f->buffer) << "[e] = "
            << round_function(b->dtype) << "(" << cuda_float_literal(f->value) << ");\n";
        out << "  __syncthreads();\n";
        shared_touched = false;
        break;
      }
      case StmtKind::Reduce: {
        auto r = s.as<ReduceNode>();
        const int64_t warps = plan.group / 32;  // per row
        out << "  {  // reduce into " << r->dst.name << " from registers: per thread, across the warp"
            << (warps > 1 ? ", then the row's " + std::to_string(warps) + " warps through shared memory" : "") << "\n";
        out << "  float acc_ = " << op_identity(r->op) << ";\n";
        // The domain's axes are the row's; the reduce axes walk the point tiles' elements.
        const auto axes = concat(r->domain.axes, r->reduce_axes);
        int in = open_vectors(axes);
        out << pad(in) << "#pragma unroll\n";
        out << pad(in) << "for (int i_ = 0; i_ < " << V << "; ++i_) {\n";
        register_axes_element(out, axes, in + 1);
        std::string update = "acc_ = " + op_functor(r->op) + "(acc_, " + printer_.print_float(r->value) + ");";
        if (r->where) out << pad(in + 1) << "if (" << printer_.print_bool(r->where) << ") " << update << "\n";
        else out << pad(in + 1) << update << "\n";
        out << pad(in) << "}\n";
        close(1);
        out << "  acc_ = solder::reduce::warp_combine(acc_, 1, 32, " << op_functor(r->op) << ");\n";
        if (warps > 1) {
          out << "  if (threadIdx.x % 32 == 0) reduce_scratch[threadIdx.x / 32] = acc_;\n";
          out << "  __syncthreads();\n";
        }
        out << "  if (lane_ == 0) {\n";
        if (warps > 1) {
          out << "    acc_ = reduce_scratch[row_ * " << warps << "];\n";
          out << "    for (int j_ = 1; j_ < " << warps << "; ++j_) acc_ = " << op_functor(r->op) << "(acc_, reduce_scratch[row_ * " << warps << " + j_]);\n";
        }
        out << "    int rest_ = row_;\n";
        for (size_t d = r->domain.axes.size(); d-- > 0;) {
          const std::string id = cuda_identifier(r->domain.axes[d].var);
          out << "    const long long " << id << " = rest_ % " << r->domain.axes[d].extent << "; rest_ /= " << r->domain.axes[d].extent
              << "; (void)" << id << ";\n";
        }
        out << "    (void)rest_;\n";
        // A guard on the rows (ragged M): a row outside keeps what the destination held (its partial,
        // from zeros, is dropped).
        const int body = r->domain.guard ? 3 : 2;
        if (r->domain.guard) out << "    if (" << printer_.print_bool(r->domain.guard) << ") {\n";
        if (r->accumulate) out << pad(body) << "acc_ = " << op_functor(r->op) << "(" << read_access(r->dst) << ", acc_);\n";
        write_access(out, r->dst, "acc_", body);
        if (r->domain.guard) out << "    }\n";
        out << "  }\n";
        out << "  __syncthreads();  // " << r->dst.name << " for every thread" << (warps > 1 ? "; the scratch free again" : "") << "\n";
        out << "  }\n";
        shared_touched = false;
        break;
      }
      default: throw Error("CUDA code generator: the register pass met a statement its plan excludes (please report)");
    }
  }
  return shared_touched;
}

}  // namespace solder::generic

namespace solder {

std::optional<RegisterPassFit> register_pass_fit(const KernelProgram& context, const Kernel& kernel) {
  try {
    generic::KernelWriter writer(context, kernel);
    if (!writer.register_pass_used()) return std::nullopt;
    return RegisterPassFit{writer.info().shared_bytes, writer.register_floats()};
  } catch (const std::exception&) {
    return std::nullopt;  // a kernel the generic writer refuses (queues): not the pass's
  }
}

}  // namespace solder
