#include "backend/cpu/executor.h"

#include <atomic>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "backend/cpu/executor_sync.h"
#include "ir/expr_eval.h"
#include "kernel/kernel_verifier.h"
#include "support/parallel.h"

namespace solder {
namespace {

constexpr uint32_t kPoisonBits = 0x7fdead00u;  // a quiet NaN with a payload (as float)

// Storage holds double: every value is stored rounded to its dtype (so f32 and narrower values are
// exactly what float32 storage would hold), and i32 values above 2^24 stay exact.
using Element = double;
Element poison_value() {
  float f;
  std::memcpy(&f, &kPoisonBits, sizeof f);
  return static_cast<Element>(f);  // float -> double keeps the payload, and the way back restores it
}

inline double round32(double v) { return static_cast<double>(static_cast<float>(v)); }
inline Element store_value(double v, DType dtype) { return round_to_dtype(v, dtype); }

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) { s[d] = stride; stride *= shape[d]; }
  return s;
}

// Storage that owns its elements.
struct OwnedStorage {
  std::vector<Element> data;
  TensorStorage view;
  void init(const std::string& name, const std::vector<int64_t>& shape, DType dtype, int64_t elements) {
    data.assign(static_cast<size_t>(elements), poison_value());
    view = TensorStorage{name, shape, data.data(), nullptr, dtype};
  }
};

// ---- Compiled statements ------------------------------------------------------------------------

struct CompiledAccess {
  int slot = -1;             // storage slot (globals first, then buffers)
  bool global = false;
  std::vector<CompiledExpr> index;
  std::vector<bool> data_dependent;  // the index reads a tensor: out of range is an Error, not a clip
  std::string name;
  std::vector<int64_t> shape, strides;
  DType dtype = DType::f32;
};

struct CompiledStmt {
  const StmtNode* node = nullptr;
  std::string label;         // "statement 5 (copy)"
  // Domain (copy, map, reduce, inter_cluster_reduce).
  std::vector<int> axis_slots;
  std::vector<int64_t> axis_extents;
  CompiledExpr guard;
  // Reduce axes.
  std::vector<int> reduce_slots;
  std::vector<int64_t> reduce_extents;
  CompiledExpr where;
  int rank_slot = -1;
  // Accesses and expressions.
  CompiledAccess dst, src, index_dst;
  CompiledExpr value, index_value, begin, end, cond, tag;
  // Contract: its product terms, scale and bias.
  std::vector<std::pair<CompiledExpr, CompiledExpr>> terms;
  std::vector<std::pair<CompiledExpr, CompiledExpr>> pair_terms;  // a paired contract's second product
  CompiledExpr scale, bias, epilogue;
  int value_slot = -1;       // contract: the epilogue's value buffer
  int pair_value_slot = -1;  // contract: the paired product's value buffer
  int var_slot = -1;         // for-loop variable, queue tag variable
  // Buffers by storage slot (fill, collectives, queues).
  int buffer = -1, a = -1, b = -1;
  std::vector<CompiledStmt> body, else_body;
};

class KernelRunner {
 public:
  KernelRunner(const KernelProgram& program, const Kernel& kernel, std::map<std::string, OwnedStorage>& globals,
               std::atomic<int64_t>* blocks_done)
      : program_(program), kernel_(kernel), blocks_done_(blocks_done) {
    for (auto& g : program.globals) {
      global_names_.push_back(g.name);
      global_storage_.push_back(&globals.at(g.name));
    }
    for (auto& b : kernel.buffers) buffer_index_[b.name] = static_cast<int>(kernel.buffers.size());
    for (size_t i = 0; i < kernel.buffers.size(); ++i) buffer_index_[kernel.buffers[i].name] = static_cast<int>(i);
    for (auto& g : kernel.grid) var_slot(g.var);
    int counter = 0;
    body_ = compile_block(kernel.body, counter);
  }

  KernelTraffic run() {
    const int64_t blocks = kernel_.blocks();
    const int cluster = kernel_.cluster;
    bool has_queues = std::any_of(kernel_.buffers.begin(), kernel_.buffers.end(), [](auto& b) { return b.scope == Scope::queue; });
    traffic_.kernel = kernel_.name;
    traffic_.blocks = blocks;
    counts_read_.assign(slot_count(), 0);
    counts_written_.assign(slot_count(), 0);
    if (has_queues) {
      if (blocks > 512)
        throw Error("CPU executor: kernel '" + kernel_.name + "' uses queues and has " + std::to_string(blocks) +
                    " blocks; a queue kernel must have all its blocks co-resident (at most 512 here)");
      run_concurrently(0, blocks);
      if (blocks_done_) blocks_done_->fetch_add(blocks, std::memory_order_relaxed);
    } else if (cluster > 1) {
      parallel_for(blocks / cluster, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          run_concurrently(c * cluster, cluster);
          if (blocks_done_) blocks_done_->fetch_add(cluster, std::memory_order_relaxed);
        }
      });
    } else {
      parallel_for(blocks, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          run_block(b, nullptr, nullptr);
          if (blocks_done_) blocks_done_->fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    for (size_t s = 0; s < global_names_.size(); ++s) {
      int64_t bytes = dtype_bytes(program_.globals[s].dtype);
      if (counts_read_[s]) traffic_.read_by_tensor[global_names_[s]] += counts_read_[s] * bytes;
      if (counts_written_[s]) traffic_.written_by_tensor[global_names_[s]] += counts_written_[s] * bytes;
      traffic_.bytes_read += counts_read_[s] * bytes;
      traffic_.bytes_written += counts_written_[s] * bytes;
    }
    return traffic_;
  }

 private:
  const KernelProgram& program_;
  const Kernel& kernel_;
  std::atomic<int64_t>* blocks_done_ = nullptr;
  std::vector<std::string> global_names_;
  std::vector<OwnedStorage*> global_storage_;
  std::map<std::string, int> buffer_index_;
  std::vector<std::string> vars_;
  std::vector<CompiledStmt> body_;
  KernelTraffic traffic_;
  std::mutex counts_mutex_, atomic_mutex_;
  std::vector<int64_t> counts_read_, counts_written_;

  size_t slot_count() const { return global_names_.size() + kernel_.buffers.size(); }

  int var_slot(const std::string& name) {
    auto it = std::find(vars_.begin(), vars_.end(), name);
    if (it != vars_.end()) return static_cast<int>(it - vars_.begin());
    vars_.push_back(name);
    return static_cast<int>(vars_.size() - 1);
  }

  int storage_slot(const std::string& name) const {
    for (size_t i = 0; i < global_names_.size(); ++i) if (global_names_[i] == name) return static_cast<int>(i);
    auto it = buffer_index_.find(name);
    if (it == buffer_index_.end()) throw Error("CPU executor: '" + name + "' is neither a global nor a buffer");
    return static_cast<int>(global_names_.size()) + it->second;
  }

  // Storage prototypes for compilation (shape and dtype of each name).
  std::map<std::string, TensorStorage> prototypes_;
  const TensorStorage* prototype(const std::string& name) {
    auto it = prototypes_.find(name);
    if (it != prototypes_.end()) return &it->second;
    int slot = storage_slot(name);
    TensorStorage p;
    if (slot < static_cast<int>(global_names_.size())) {
      p = global_storage_[static_cast<size_t>(slot)]->view;
    } else {
      const Buffer& b = kernel_.buffers[static_cast<size_t>(slot) - global_names_.size()];
      p = TensorStorage{b.name, b.shape, nullptr, nullptr, b.dtype};
    }
    return &(prototypes_[name] = p);
  }

  CompiledExpr compile(const Expr& e) {
    if (!e) return {};
    for (auto& v : vars_used(e)) var_slot(v);  // variables bound later (tags) get slots too
    CompiledExpr::Bindings b;
    b.vars = vars_;
    b.tensor = [this](const std::string& name) { return prototype(name); };
    b.tensor_slot = [this](const std::string& name) { return storage_slot(name); };
    b.dims = program_.dims;
    // Variables are referenced by slot, so later additions to vars_ do not disturb this one.
    return CompiledExpr(e, b, Arithmetic::float32);
  }

  CompiledAccess compile_access(const Access& a) {
    CompiledAccess c;
    c.slot = storage_slot(a.name);
    c.global = c.slot < static_cast<int>(global_names_.size());
    const TensorStorage* p = prototype(a.name);
    c.shape = p->shape;
    c.strides = strides_of(c.shape);
    c.dtype = p->dtype;
    c.name = a.name;
    for (auto& i : a.index) {
      c.index.push_back(compile(i));
      c.data_dependent.push_back(!tensors_used(i).empty());
    }
    return c;
  }

  void compile_domain(CompiledStmt& c, const Domain& d) {
    for (auto& a : d.axes) {
      c.axis_slots.push_back(var_slot(a.var));
      c.axis_extents.push_back(a.extent);
    }
    c.guard = compile(d.guard);
  }

  std::vector<CompiledStmt> compile_block(const Block& block, int& counter) {
    std::vector<CompiledStmt> out;
    for (auto& s : block) out.push_back(compile_stmt(s, counter));
    return out;
  }

  CompiledStmt compile_stmt(const Stmt& s, int& counter) {
    CompiledStmt c;
    c.node = s.get();
    c.label = "statement " + std::to_string(++counter) + " (" + std::string(stmt_kind_name(s.kind())) + ")";
    switch (s.kind()) {
      case StmtKind::For: {
        auto n = s.as<ForNode>();
        c.var_slot = var_slot(n->var);
        c.begin = compile(n->begin);
        c.end = compile(n->end);
        c.body = compile_block(n->body, counter);
        break;
      }
      case StmtKind::If: {
        auto n = s.as<IfNode>();
        c.cond = compile(n->cond);
        c.body = compile_block(n->then_body, counter);
        c.else_body = compile_block(n->else_body, counter);
        break;
      }
      case StmtKind::Fill: c.buffer = storage_slot(s.as<FillNode>()->buffer); break;
      case StmtKind::Copy: {
        auto n = s.as<CopyNode>();
        compile_domain(c, n->domain);
        c.src = compile_access(n->src);
        c.dst = compile_access(n->dst);
        break;
      }
      case StmtKind::Map: {
        auto n = s.as<MapNode>();
        compile_domain(c, n->domain);
        c.value = compile(n->value);
        c.dst = compile_access(n->dst);
        break;
      }
      case StmtKind::Reduce: {
        auto n = s.as<ReduceNode>();
        compile_domain(c, n->domain);
        for (auto& a : n->reduce_axes) {
          c.reduce_slots.push_back(var_slot(a.var));
          c.reduce_extents.push_back(a.extent);
        }
        if (n->op == ReduceOp::topk) c.rank_slot = var_slot(n->rank_var);
        c.value = compile(n->value);
        c.where = compile(n->where);
        c.dst = compile_access(n->dst);
        if (!n->index_dst.name.empty()) {
          c.index_dst = compile_access(n->index_dst);
          c.index_value = compile(n->index_value);
        }
        break;
      }
      case StmtKind::Contract: {
        auto n = s.as<ContractNode>();
        compile_domain(c, n->domain);
        for (auto& a : n->reduce_axes) {
          c.reduce_slots.push_back(var_slot(a.var));
          c.reduce_extents.push_back(a.extent);
        }
        for (auto& t : n->terms) c.terms.emplace_back(compile(t.a), compile(t.b));
        c.scale = compile(n->scale);
        c.bias = compile(n->bias);
        c.where = compile(n->where);
        c.dst = compile_access(n->dst);
        if (n->epilogue) {
          c.value_slot = storage_slot(n->value);
          c.epilogue = compile(n->epilogue);
        }
        if (!n->pair_terms.empty()) {
          for (auto& t : n->pair_terms) c.pair_terms.emplace_back(compile(t.a), compile(t.b));
          c.pair_value_slot = storage_slot(n->pair_value);
        }
        break;
      }
      case StmtKind::ClusterReduce: c.buffer = storage_slot(s.as<ClusterReduceNode>()->buffer); break;
      case StmtKind::ClusterGather: c.a = storage_slot(s.as<ClusterGatherNode>()->src); c.b = storage_slot(s.as<ClusterGatherNode>()->dst); break;
      case StmtKind::ReduceScatter: c.a = storage_slot(s.as<ReduceScatterNode>()->src); c.b = storage_slot(s.as<ReduceScatterNode>()->dst); break;
      case StmtKind::DsmShuffle: c.a = storage_slot(s.as<DsmShuffleNode>()->src); c.b = storage_slot(s.as<DsmShuffleNode>()->dst); break;
      case StmtKind::AllExchange: c.buffer = storage_slot(s.as<AllExchangeNode>()->buffer); break;
      case StmtKind::InterClusterReduce: {
        auto n = s.as<InterClusterReduceNode>();
        compile_domain(c, n->domain);
        c.src = compile_access(n->src);
        c.dst = compile_access(n->dst);
        break;
      }
      case StmtKind::QueuePush: {
        auto n = s.as<QueuePushNode>();
        c.buffer = storage_slot(n->queue);
        c.a = storage_slot(n->src);
        c.tag = compile(n->tag);
        break;
      }
      case StmtKind::QueuePop: {
        auto n = s.as<QueuePopNode>();
        c.buffer = storage_slot(n->queue);
        c.a = storage_slot(n->dst);
        c.var_slot = var_slot(n->tag_var);
        break;
      }
      case StmtKind::Barrier: break;
    }
    return c;
  }

  // ---- Execution ----------------------------------------------------------------------------

  struct BlockState {
    int64_t linear = 0, cluster_id = 0;
    int rank = 0;
    std::vector<int64_t> vars;
    std::vector<OwnedStorage> buffers;
    std::vector<const TensorStorage*> table;
    std::vector<int64_t> reads, writes;
    SyncDomain* sync = nullptr;
    std::vector<BlockState*>* peers = nullptr;  // the blocks of this block's cluster, by rank
  };

  void run_concurrently(int64_t first, int64_t count) {
    SyncDomain sync(kernel_.name, static_cast<int>(count), kernel_.cluster);
    std::vector<BlockState> states(static_cast<size_t>(count));
    std::map<int64_t, std::vector<BlockState*>> clusters;
    for (int64_t i = 0; i < count; ++i) {
      init_block(states[static_cast<size_t>(i)], first + i);
      auto& cl = clusters[states[static_cast<size_t>(i)].cluster_id];
      cl.resize(static_cast<size_t>(kernel_.cluster));
      cl[static_cast<size_t>(states[static_cast<size_t>(i)].rank)] = &states[static_cast<size_t>(i)];
    }
    std::mutex error_mutex;
    std::string first_error;
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < count; ++i) {
      BlockState& st = states[static_cast<size_t>(i)];
      st.sync = &sync;
      st.peers = &clusters[st.cluster_id];
      threads.emplace_back([&, i] {
        BlockState& me = states[static_cast<size_t>(i)];
        try {
          execute(body_, me);
        } catch (const std::exception& e) {
          {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (first_error.empty()) first_error = e.what();
          }
          sync.abort(e.what());
        }
        sync.exit_block(static_cast<int>(me.linear), static_cast<int>(me.cluster_id));
      });
    }
    for (auto& t : threads) t.join();
    if (!first_error.empty()) throw Error(first_error);
    for (auto& st : states) merge_counts(st);
  }

  void init_block(BlockState& st, int64_t linear) {
    st.linear = linear;
    st.cluster_id = linear / kernel_.cluster;
    st.vars.assign(vars_.size(), 0);
    int64_t rest = linear;
    for (size_t d = kernel_.grid.size(); d-- > 0;) {
      st.vars[d] = rest % kernel_.grid[d].extent;  // grid vars hold the first slots
      rest /= kernel_.grid[d].extent;
    }
    st.rank = static_cast<int>(st.vars[kernel_.grid.size() - 1] % kernel_.cluster);
    st.buffers.resize(kernel_.buffers.size());
    for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const Buffer& b = kernel_.buffers[i];
      if (b.scope == Scope::queue) continue;
      st.buffers[i].init(b.name, b.shape, b.dtype, b.elements());
    }
    st.table.clear();
    for (auto* g : global_storage_) st.table.push_back(&g->view);
    for (auto& b : st.buffers) st.table.push_back(&b.view);
    st.reads.assign(slot_count(), 0);
    st.writes.assign(slot_count(), 0);
  }

  void run_block(int64_t linear, SyncDomain* sync, std::vector<BlockState*>* peers) {
    BlockState st;
    init_block(st, linear);
    st.sync = sync;
    st.peers = peers;
    execute(body_, st);
    merge_counts(st);
  }

  void merge_counts(const BlockState& st) {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    for (size_t i = 0; i < global_names_.size(); ++i) {
      counts_read_[i] += st.reads[i];
      counts_written_[i] += st.writes[i];
    }
  }

  Element* data_of(BlockState& st, int slot) {
    if (slot < static_cast<int>(global_names_.size())) return global_storage_[static_cast<size_t>(slot)]->data.data();
    return st.buffers[static_cast<size_t>(slot) - global_names_.size()].data.data();
  }
  const Buffer& buffer_of(int slot) const { return kernel_.buffers[static_cast<size_t>(slot) - global_names_.size()]; }

  double eval(const CompiledExpr& e, BlockState& st) { return e.eval(st.vars.data(), st.table.data(), st.reads.data()); }

  // The element offset of an access, or -1 when a global index is out of bounds (buffers: error).
  int64_t offset(const CompiledAccess& a, BlockState& st, const std::string& label) {
    int64_t off = 0;
    for (size_t d = 0; d < a.index.size(); ++d) {
      auto i = static_cast<int64_t>(eval(a.index[d], st));
      if (i < 0 || i >= a.shape[d]) {
        if (a.global && a.data_dependent[d]) {
          // A data-dependent index (a gather) is checked, never clipped (docs/kernel-ir.md, "Bounds").
          std::string where = a.name + "[";
          for (size_t k = 0; k < a.index.size(); ++k)
            where += (k ? ", " : "") + std::to_string(static_cast<int64_t>(eval(a.index[k], st)));
          throw Error("load out of range: " + where + "]: index " + std::to_string(i) + " of dim " + std::to_string(d + 1) +
                      " is outside [0, " + std::to_string(a.shape[d]) + ")");
        }
        if (a.global) return -1;
        throw Error("CPU executor: kernel '" + kernel_.name + "', " + label + ": index " + std::to_string(i) + " of dim " +
                    std::to_string(d + 1) + " is out of the buffer's bounds (" + std::to_string(a.shape[d]) + ")");
      }
      off += i * a.strides[d];
    }
    return off;
  }

  void store(const CompiledAccess& a, BlockState& st, int64_t off, double v) {
    data_of(st, a.slot)[off] = store_value(v, a.dtype);
    if (a.global) ++st.writes[static_cast<size_t>(a.slot)];
  }

  // Calls f() at every point of the axes (slots/extents), setting the variables.
  template <class F>
  static void for_each_point(BlockState& st, const std::vector<int>& slots, const std::vector<int64_t>& extents, F&& f) {
    int64_t total = 1;
    for (int64_t e : extents) total *= e;
    for (int64_t p = 0; p < total; ++p) {
      int64_t rest = p;
      for (size_t d = slots.size(); d-- > 0;) {
        st.vars[static_cast<size_t>(slots[d])] = rest % extents[d];
        rest /= extents[d];
      }
      f();
    }
  }

  void execute(const std::vector<CompiledStmt>& block, BlockState& st) {
    for (auto& c : block) {
      try {
        execute_one(c, st);
      } catch (const Error& e) {
        // Name the kernel and statement (once: nested statements rethrow with context already).
        if (e.message().rfind("CPU executor:", 0) == 0 || e.message().rfind("deadlock", 0) == 0) throw;
        throw Error("CPU executor: kernel '" + kernel_.name + "', " + c.label + ": " + e.message());
      }
    }
  }

  void execute_one(const CompiledStmt& c, BlockState& st) {
    switch (c.node->kind) {
      case StmtKind::For: {
        auto begin = static_cast<int64_t>(eval(c.begin, st)), end = static_cast<int64_t>(eval(c.end, st));
        for (int64_t i = begin; i < end; ++i) {
          st.vars[static_cast<size_t>(c.var_slot)] = i;
          execute(c.body, st);
        }
        return;
      }
      case StmtKind::If:
        execute(eval(c.cond, st) != 0 ? c.body : c.else_body, st);
        return;
      case StmtKind::Fill: {
        const Buffer& b = buffer_of(c.buffer);
        Element v = store_value(static_cast<const FillNode*>(c.node)->value, b.dtype);
        std::fill_n(data_of(st, c.buffer), b.elements(), v);
        return;
      }
      case StmtKind::Copy:
        for_each_point(st, c.axis_slots, c.axis_extents, [&] {
          if (c.guard.defined() && eval(c.guard, st) == 0) return;
          int64_t from = offset(c.src, st, c.label);
          double v = 0;
          if (from >= 0) {
            v = data_of(st, c.src.slot)[from];
            if (c.src.global) ++st.reads[static_cast<size_t>(c.src.slot)];
          }
          int64_t to = offset(c.dst, st, c.label);
          if (to >= 0) store(c.dst, st, to, v);
        });
        return;
      case StmtKind::Map:
        for_each_point(st, c.axis_slots, c.axis_extents, [&] {
          if (c.guard.defined() && eval(c.guard, st) == 0) return;
          double v = eval(c.value, st);
          int64_t to = offset(c.dst, st, c.label);
          if (to >= 0) store(c.dst, st, to, v);
        });
        return;
      case StmtKind::Reduce: return execute_reduce(c, st);
      case StmtKind::Contract: return execute_contract(c, st);
      case StmtKind::ClusterReduce:
      case StmtKind::ClusterGather:
      case StmtKind::ReduceScatter:
      case StmtKind::DsmShuffle:
      case StmtKind::AllExchange: return execute_collective(c, st);
      case StmtKind::InterClusterReduce: {
        auto op = static_cast<const InterClusterReduceNode*>(c.node)->op;
        for_each_point(st, c.axis_slots, c.axis_extents, [&] {
          if (c.guard.defined() && eval(c.guard, st) == 0) return;
          int64_t from = offset(c.src, st, c.label);
          int64_t to = offset(c.dst, st, c.label);
          if (to < 0 || from < 0) return;
          double v = data_of(st, c.src.slot)[from];
          std::lock_guard<std::mutex> lock(atomic_mutex_);
          Element* d = data_of(st, c.dst.slot);
          double old = d[to];
          double r = op == ReduceOp::sum ? round32(old + v) : op == ReduceOp::max ? max_nan(old, v) : min_nan(old, v);
          store(c.dst, st, to, r);
        });
        return;
      }
      case StmtKind::QueuePush: {
        const Buffer& src = buffer_of(c.a);
        const Element* d = data_of(st, c.a);
        std::vector<float> tile(d, d + src.elements());
        const Buffer& q = buffer_of(c.buffer);
        st.sync->queue_push(static_cast<int>(st.linear), q.name, q.depth, std::move(tile), static_cast<int64_t>(eval(c.tag, st)), c.label);
        return;
      }
      case StmtKind::QueuePop: {
        int64_t tag = 0;
        std::vector<float> tile = st.sync->queue_pop(static_cast<int>(st.linear), buffer_of(c.buffer).name, &tag, c.label);
        const Buffer& dst = buffer_of(c.a);
        Element* d = data_of(st, c.a);
        for (size_t i = 0; i < tile.size(); ++i) d[i] = store_value(tile[i], dst.dtype);
        st.vars[static_cast<size_t>(c.var_slot)] = tag;
        return;
      }
      case StmtKind::Barrier:
        if (static_cast<const BarrierNode*>(c.node)->cluster)
          st.sync->cluster_barrier(static_cast<int>(st.linear), static_cast<int>(st.cluster_id), c.label);
        return;
    }
  }

  void execute_reduce(const CompiledStmt& c, BlockState& st) {
    auto n = static_cast<const ReduceNode*>(c.node);
    const bool has_index = !n->index_dst.name.empty();
    std::vector<std::pair<double, double>> candidates;  // topk: (value, index)
    for_each_point(st, c.axis_slots, c.axis_extents, [&] {
      if (c.guard.defined() && eval(c.guard, st) == 0) return;
      switch (n->op) {
        case ReduceOp::sum:
        case ReduceOp::prod:
        case ReduceOp::max:
        case ReduceOp::min: {
          double acc;
          int64_t to = offset(c.dst, st, c.label);
          if (n->accumulate) {
            acc = to >= 0 ? data_of(st, c.dst.slot)[to] : 0;
            if (c.dst.global && to >= 0) ++st.reads[static_cast<size_t>(c.dst.slot)];
          } else {
            acc = n->op == ReduceOp::sum ? 0 : n->op == ReduceOp::prod ? 1
                : n->op == ReduceOp::max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
          }
          for_each_point(st, c.reduce_slots, c.reduce_extents, [&] {
            if (c.where.defined() && eval(c.where, st) == 0) return;
            double v = eval(c.value, st);
            switch (n->op) {
              case ReduceOp::sum: acc = round32(acc + v); break;
              case ReduceOp::prod: acc = round32(acc * v); break;
              case ReduceOp::max: acc = max_nan(acc, v); break;
              default: acc = min_nan(acc, v); break;
            }
          });
          if (to >= 0) store(c.dst, st, to, acc);
          return;
        }
        case ReduceOp::argmax:
        case ReduceOp::argmin: {
          bool is_max = n->op == ReduceOp::argmax;
          int64_t to = offset(c.dst, st, c.label), ito = offset(c.index_dst, st, c.label);
          double best = 0, best_index = -1;
          if (n->accumulate && to >= 0 && ito >= 0) {
            best = data_of(st, c.dst.slot)[to];
            best_index = data_of(st, c.index_dst.slot)[ito];
          }
          for_each_point(st, c.reduce_slots, c.reduce_extents, [&] {
            if (c.where.defined() && eval(c.where, st) == 0) return;
            if (best_index >= 0 && std::isnan(best)) return;  // the first NaN wins
            double v = eval(c.value, st);
            if (best_index < 0 || std::isnan(v) || (is_max ? v > best : v < best)) {
              best = v;
              best_index = eval(c.index_value, st);
            }
          });
          if (to >= 0) store(c.dst, st, to, best);
          if (ito >= 0) store(c.index_dst, st, ito, best_index);
          return;
        }
        case ReduceOp::topk: {
          candidates.clear();
          auto rank_slot = static_cast<size_t>(c.rank_slot);
          if (n->accumulate) {
            for (int64_t r = 0; r < n->k; ++r) {
              st.vars[rank_slot] = r;
              int64_t to = offset(c.dst, st, c.label);
              double v = to >= 0 ? data_of(st, c.dst.slot)[to] : 0, idx = -1;
              if (has_index) {
                int64_t ito = offset(c.index_dst, st, c.label);
                if (ito >= 0) idx = data_of(st, c.index_dst.slot)[ito];
              }
              if (!(v == -std::numeric_limits<double>::infinity() && idx < 0)) candidates.emplace_back(v, idx);
            }
          }
          for_each_point(st, c.reduce_slots, c.reduce_extents, [&] {
            if (c.where.defined() && eval(c.where, st) == 0) return;
            candidates.emplace_back(eval(c.value, st), c.index_value.defined() ? eval(c.index_value, st) : 0);
          });
          auto greater = [](const std::pair<double, double>& a, const std::pair<double, double>& b) {
            bool na = std::isnan(a.first), nb = std::isnan(b.first);
            if (na != nb) return na;
            if (!na && a.first != b.first) return a.first > b.first;
            return a.second < b.second;
          };
          std::stable_sort(candidates.begin(), candidates.end(), greater);
          for (int64_t r = 0; r < n->k; ++r) {
            st.vars[rank_slot] = r;
            bool present = r < static_cast<int64_t>(candidates.size());
            double v = present ? candidates[static_cast<size_t>(r)].first : -std::numeric_limits<double>::infinity();
            double idx = present ? candidates[static_cast<size_t>(r)].second : -1;
            int64_t to = offset(c.dst, st, c.label);
            if (to >= 0) store(c.dst, st, to, v);
            if (has_index) {
              int64_t ito = offset(c.index_dst, st, c.label);
              if (ito >= 0) store(c.index_dst, st, ito, idx);
            }
          }
          return;
        }
        case ReduceOp::none: return;
      }
    });
  }

  // contract (kernel_ir.h): operands rounded to the MMA type (3xtf32: split into their tf32 parts, three
  // products), products and sums in float32, then scale and bias, then dst's rounding.
  void execute_contract(const CompiledStmt& c, BlockState& st) {
    auto n = static_cast<const ContractNode*>(c.node);
    for_each_point(st, c.axis_slots, c.axis_extents, [&] {
      if (c.guard.defined() && eval(c.guard, st) == 0) return;
      int64_t to = offset(c.dst, st, c.label);
      double acc = 0, acc2 = 0;
      for_each_point(st, c.reduce_slots, c.reduce_extents, [&] {
        if (c.where.defined() && eval(c.where, st) == 0) return;
        for (auto& [a, b] : c.terms) acc = accumulate_product(acc, eval(a, st), eval(b, st), n->type);
        for (auto& [a, b] : c.pair_terms) acc2 = accumulate_product(acc2, eval(a, st), eval(b, st), n->type);
      });
      if (c.pair_value_slot >= 0) data_of(st, c.pair_value_slot)[0] = store_value(acc2, DType::f32);
      double v = acc;
      if (c.scale.defined()) v = round32(v * eval(c.scale, st));
      if (c.bias.defined()) v = round32(v + eval(c.bias, st));
      if (c.epilogue.defined()) {
        data_of(st, c.value_slot)[0] = store_value(v, DType::f32);
        v = eval(c.epilogue, st);
      }
      if (n->accumulate && to >= 0) {
        v = round32(data_of(st, c.dst.slot)[to] + v);
        if (c.dst.global) ++st.reads[static_cast<size_t>(c.dst.slot)];
      }
      if (to >= 0) store(c.dst, st, to, v);
    });
  }

  // All collectives: every block arrives, computes its result from its peers' buffers, arrives
  // again (no one has modified a buffer its peers read), then writes its result.
  void execute_collective(const CompiledStmt& c, BlockState& st) {
    const int C = kernel_.cluster;
    auto& peers = *st.peers;
    auto peer_data = [&](int rank, int slot) -> const Element* { return data_of(*peers[static_cast<size_t>(rank)], slot); };
    // sum: f32 at every step, in rank order. max/min: NaN propagates and -0 < +0 (max_nan / min_nan, the
    // PTX max.NaN / min.NaN rule), so their result does not depend on the rank order.
    auto combine = [](ReduceOp op, double acc, double v) {
      if (op == ReduceOp::sum) return round32(acc + v);
      return op == ReduceOp::max ? max_nan(acc, v) : min_nan(acc, v);
    };
    std::vector<double> result;
    int target = -1;
    st.sync->cluster_barrier(static_cast<int>(st.linear), static_cast<int>(st.cluster_id), c.label);
    switch (c.node->kind) {
      case StmtKind::ClusterReduce: {
        auto op = static_cast<const ClusterReduceNode*>(c.node)->op;
        int64_t n = buffer_of(c.buffer).elements();
        result.assign(peer_data(0, c.buffer), peer_data(0, c.buffer) + n);
        for (int r = 1; r < C; ++r)
          for (int64_t i = 0; i < n; ++i) result[static_cast<size_t>(i)] = combine(op, result[static_cast<size_t>(i)], peer_data(r, c.buffer)[i]);
        target = c.buffer;
        break;
      }
      case StmtKind::AllExchange: {
        auto node = static_cast<const AllExchangeNode*>(c.node);
        int group = node->group ? node->group : C;
        int first = st.rank / group * group;
        int64_t n = buffer_of(c.buffer).elements();
        result.assign(peer_data(first, c.buffer), peer_data(first, c.buffer) + n);
        for (int r = first + 1; r < first + group; ++r)
          for (int64_t i = 0; i < n; ++i) {
            double& acc = result[static_cast<size_t>(i)];
            acc = node->multiply ? round32(acc * peer_data(r, c.buffer)[i]) : round32(acc + peer_data(r, c.buffer)[i]);
          }
        target = c.buffer;
        break;
      }
      case StmtKind::ClusterGather: {
        int64_t n = buffer_of(c.a).elements();
        for (int r = 0; r < C; ++r) result.insert(result.end(), peer_data(r, c.a), peer_data(r, c.a) + n);
        target = c.b;
        break;
      }
      case StmtKind::ReduceScatter: {
        auto op = static_cast<const ReduceScatterNode*>(c.node)->op;
        int64_t n = buffer_of(c.b).elements();
        result.assign(peer_data(0, c.a) + st.rank * n, peer_data(0, c.a) + (st.rank + 1) * n);
        for (int r = 1; r < C; ++r)
          for (int64_t i = 0; i < n; ++i)
            result[static_cast<size_t>(i)] = combine(op, result[static_cast<size_t>(i)], peer_data(r, c.a)[st.rank * n + i]);
        target = c.b;
        break;
      }
      case StmtKind::DsmShuffle: {
        auto node = static_cast<const DsmShuffleNode*>(c.node);
        int group = node->group ? node->group : C;
        int first = st.rank / group * group;
        int from = first + (st.rank - first - 1 + group) % group;
        int64_t n = buffer_of(c.a).elements();
        result.assign(peer_data(from, c.a), peer_data(from, c.a) + n);
        target = c.b;
        break;
      }
      default: break;
    }
    st.sync->cluster_barrier(static_cast<int>(st.linear), static_cast<int>(st.cluster_id), c.label);
    const Buffer& t = buffer_of(target);
    Element* out = data_of(st, target);
    for (size_t i = 0; i < result.size(); ++i) out[i] = store_value(result[i], t.dtype);
  }
};

}  // namespace

bool is_poison(double value) {
  const float narrowed = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &narrowed, sizeof bits);
  return std::isnan(value) && bits == kPoisonBits;
}

ExecutionResult execute_kernel_program(const KernelProgram& program, const TensorSet& inputs, ExecutionProgress* progress) {
  verify_kernel_program(program);
  std::map<std::string, OwnedStorage> globals;
  for (auto& g : program.globals) {
    OwnedStorage& s = globals[g.name];
    s.init(g.name, g.shape, g.dtype, g.elements());
    if (g.role == GlobalRole::input) {
      auto it = inputs.find(g.name);
      if (it == inputs.end()) throw Error("CPU executor: input '" + g.name + "' was not provided");
      if (it->second.shape != g.shape) throw Error("CPU executor: input '" + g.name + "' has the wrong shape");
      for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = store_value(it->second.values[i], g.dtype);
    }
  }
  ExecutionResult result;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const Kernel& k = program.kernels[i];
    if (progress) {
      progress->blocks_done.store(0);
      progress->kernel.store(static_cast<int>(i));
    }
    KernelRunner runner(program, k, globals, progress ? &progress->blocks_done : nullptr);
    result.traffic.push_back(runner.run());
  }
  for (auto& g : program.globals) {
    if (g.role != GlobalRole::output) continue;
    HostTensor t{g.name, g.shape, g.dtype, {}};
    const OwnedStorage& s = globals.at(g.name);
    t.values.reserve(s.data.size());
    int64_t unwritten = 0;
    for (Element v : s.data) {
      if (is_poison(v)) ++unwritten;
      t.values.push_back(v);
    }
    result.unwritten[g.name] = unwritten;
    result.outputs[g.name] = std::move(t);
  }
  return result;
}

}  // namespace solder
