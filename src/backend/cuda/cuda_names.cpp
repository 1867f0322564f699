#include "backend/cuda/cuda_names.h"

#include <atomic>
#include <regex>
#include <stdexcept>

#include "ir/expr_visitor.h"

namespace solder {

const std::set<std::string>& reserved_cuda_words() {
  static const std::set<std::string> words = [] {
    std::set<std::string> w = {
        // C++20 keywords, alternative tokens and identifiers with a special meaning.
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
        "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
        "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
        "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "final", "float", "for", "friend", "goto",
        "if", "import", "inline", "int", "long", "module", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
        "nullptr", "operator", "or", "or_eq", "override", "private", "protected", "public", "register",
        "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static", "static_assert",
        "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid",
        "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
        // Predefined macros of GNU modes, and C library names that are macros on some systems.
        "linux", "unix", "i386", "major", "minor", "makedev", "isnan", "isinf", "isfinite", "signbit", "fpclassify",
        "isnormal", "setjmp", "va_start", "va_end", "va_arg", "va_copy", "FILE",
        // The data-dependent index check (cuda_expr.h) and the cluster channels' locals.
        "solder_checked_index", "solder_index_error", "SOLDER_GEMM_KERNEL", "SOLDER_GEMM_DUAL_KERNEL", "SOLDER_GEMM_RANGES_KERNEL", "SOLDER_ATTENTION_KERNEL", "SOLDER_ATTENTION_KERNEL_TMA_STORE",
        "SOLDER_ATTENTION_DUAL_KERNEL", "combine",  // the attention dual mode's entry macro and epilogue hook
        "kStagedSum", "staged_column",  // the attention score functor's tile-plus-column bias (functors.cuh)
        "kOneIdTiles",  // the data mask's one-id boundary tiles (functors.cuh)
        "kColGroups", "col_groups", "col_group", "group_bh",  // a data mask's key-id groups (the id table)
        "dim", "extent", "index", "parameter", "channel_0", "channel_1",
        // The GEMM skeleton's prologue functor (gemm_prologue_writer.cpp).
        "SOLDER_GEMM_PROLOGUE_KERNEL", "Sides", "PreSweep", "side_init", "side_step", "side_merge", "operand",
        "RowDivisor", "numerator", "divisor", "RowFactor", "row_factor", "scaled", "Pairs", "scaled_pair",
        // The GEMM skeleton's row-store epilogue hooks (gemm_skeleton_writer.cpp, sm90_gemm.cuh).
        "element", "value", "row_pointer",
        // The attention skeleton's functor interface (device/solder/attention/functors.cuh).
        "kIdentity", "kSoftmaxSchedule", "kExp2Emulated", "key_tiles", "partial", "scale_log2", "visible", "kAffine", "affine", "kRowInterval", "row_columns",
        "kBias", "bias", "dot_factor",
        "kDataTiles", "kEmptyRowNaN", "kMaxKeyTiles", "row_id", "col_id", "match", "tile_class",
        // a staged bias (functors.cuh, kStagedBias): the score functor's members and types
        "kStagedBias", "BiasTile", "BiasColumn", "bias_tile", "bias_column", "bias_tile_batch", "bias_column_row", "staged_bias",
        // an epilogue preload (functors.cuh, kPreload): the epilogue functor's members and type
        "kPreload", "Preload", "preload",
        // the staged epilogue (functors.cuh, kStaged): the epilogue functor's members
        "kStaged", "staged_pack", "staged_row",
        // the staged epilogue's TMA store (functors.cuh, kTmaStore)
        "kTmaStore", "out_map",
        // the dual mode's staged combine (functors.cuh, kStagedCombine)
        "kStagedCombine", "staged_combine",
        "max_ll_", "min_ll_",
        // CUDA: built-in variables, vector and half types, namespaces, the runtime's names.
        "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "half", "half2", "nv_bfloat16",
        "nv_bfloat162", "cuda", "std", "nvcuda", "cooperative_groups", "cg", "solder", "cute", "cutlass", "main",
        "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
        "uint64_t", "intptr_t", "uintptr_t", "nullptr_t", "cudaError_t", "cudaStream_t", "cudaLaunchKernel",
        "cudaLaunchKernelExC", "cudaSetupArgument", "cudaConfigureCall",
        // C and CUDA math and library functions the generated code or its headers call unqualified.
        "abs", "fabs", "fabsf", "exp", "expf", "exp2", "exp2f", "exp10f", "expm1f", "log", "logf", "log2", "log2f",
        "log10f", "log1pf", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "cbrtf", "pow", "powf", "sin", "sinf", "cos", "cosf",
        "tan", "tanf", "tanh", "tanhf", "erf", "erff", "erfcf", "floor", "floorf", "ceil", "ceilf", "round", "roundf",
        "rint", "rintf", "trunc", "truncf", "fmod", "fmodf", "min", "max", "fmin", "fminf", "fmax", "fmaxf", "fma",
        "fmaf", "sincosf", "atan2f", "asinf", "acosf", "atanf", "sinhf", "coshf", "copysignf", "nanf", "isnanf",
        "printf", "malloc", "free", "memcpy", "memset", "atomicAdd", "atomicCAS", "atomicMax", "atomicMin",
        "atomicExch", "clock", "clock64", "assert", "llabs", "make_float2", "make_float4", "make_uint4",
        // The code generator's fixed locals that do not end in an underscore (read from the generated code
        // of every example; CudaNames.GeneratorLocalsAreReserved keeps the list complete).
        "C", "T", "S", "a_desc", "acc", "at", "b_desc", "best", "best_index", "block_linear", "c", "channel", "chunk",
        "cluster", "col_hi0", "col_lo0", "collective_scratch", "column_range0", "communicator", "copy", "count", "e",
        "e2", "eight", "greater", "hi", "kk", "ks", "lane", "lo", "load_next", "load_tile", "mailbox", "n", "next_live",
        "nt", "o", "p_frag", "p_regs", "part", "point", "r_new", "r_old", "reduce_scratch", "rest", "row0", "row_hi0",
        "row_lo0", "row_range_exchange", "rs",
        "scale", "smem", "smem_unaligned", "stage", "stream_end", "t", "tid", "tile_full", "tile_live", "tiles_done", "v",
        "v_desc", "vi", "w", "warp", "warpgroup", "wi"};
    // CUDA vector types: int1 ... double4, longlong1 ... ulonglong4.
    for (const char* base : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong",
                             "float", "double"})
      for (int n = 1; n <= 4; ++n) w.insert(std::string(base) + std::to_string(n));
    // Macros nvcc defines for a generated kernel (scripts/cuda_macro_names.sh).
    for (const char* m : {
#include "backend/cuda/cuda_macro_names.inc"
         })
      w.insert(m);
    return w;
  }();
  return words;
}

namespace {

std::atomic<bool> names_marked{false};

// Letters and digits in words joined by single underscores.
bool plain_shape(const std::string& name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '_') {
      if (i + 1 == name.size() || name[i + 1] == '_') return false;
    } else if (!std::isalnum(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// The shapes of the locals the generator derives from a name (`<tile>_stage0`, `<tile>_stages`) or
// numbers (`row_value0`, one per row value hoisted out of a fragment loop).
bool derived_shape(const std::string& name) {
  static const std::regex derived(".*_(stage[0-9]+|stages)|row_value[0-9]+");
  return std::regex_match(name, derived);
}

class Renamer {
 public:
  std::string name(const std::string& n) { return n.empty() || n[0] == '@' ? n : cuda_name(n); }

  Expr expr(const Expr& e) {
    struct Mutator : ExprMutator {
      Renamer* self;
      using ExprMutator::mutate;
      Expr mutate(const VarNode& v, const Expr&) override { return make_var(self->name(v.name), v.loc); }
      Expr mutate(const LoadNode& l, const Expr&) override {
        std::vector<Expr> index;
        for (auto& i : l.index) index.push_back(mutate(i));
        return make_load(self->name(l.tensor), std::move(index), l.loc);
      }
    } m;
    m.self = this;
    return e ? m.mutate(e) : e;
  }

  Access access(const Access& a) {
    Access r{name(a.name), {}};
    for (auto& i : a.index) r.index.push_back(expr(i));
    return r;
  }
  std::vector<Axis> axes(const std::vector<Axis>& axes) {
    std::vector<Axis> r;
    for (auto& a : axes) r.push_back({name(a.var), a.extent});
    return r;
  }
  Domain domain(const Domain& d) { return Domain{axes(d.axes), expr(d.guard)}; }

  Block block(const Block& b) {
    Block r;
    for (auto& s : b) r.push_back(stmt(s));
    return r;
  }

  Stmt stmt(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::For: {
        ForNode n = *s.as<ForNode>();
        n.var = name(n.var);
        n.begin = expr(n.begin);
        n.end = expr(n.end);
        n.body = block(n.body);
        return make_stmt(std::move(n));
      }
      case StmtKind::If: {
        IfNode n = *s.as<IfNode>();
        n.cond = expr(n.cond);
        n.then_body = block(n.then_body);
        n.else_body = block(n.else_body);
        return make_stmt(std::move(n));
      }
      case StmtKind::Fill: {
        FillNode n = *s.as<FillNode>();
        n.buffer = name(n.buffer);
        return make_stmt(std::move(n));
      }
      case StmtKind::Copy: {
        CopyNode n = *s.as<CopyNode>();
        n.domain = domain(n.domain);
        n.dst = access(n.dst);
        n.src = access(n.src);
        return make_stmt(std::move(n));
      }
      case StmtKind::Map: {
        MapNode n = *s.as<MapNode>();
        n.domain = domain(n.domain);
        n.dst = access(n.dst);
        n.value = expr(n.value);
        return make_stmt(std::move(n));
      }
      case StmtKind::Reduce: {
        ReduceNode n = *s.as<ReduceNode>();
        n.domain = domain(n.domain);
        n.reduce_axes = axes(n.reduce_axes);
        n.dst = access(n.dst);
        n.value = expr(n.value);
        n.where = expr(n.where);
        n.index_dst = access(n.index_dst);
        n.index_value = expr(n.index_value);
        n.rank_var = name(n.rank_var);
        return make_stmt(std::move(n));
      }
      case StmtKind::Contract: {
        ContractNode n = *s.as<ContractNode>();
        n.domain = domain(n.domain);
        n.reduce_axes = axes(n.reduce_axes);
        n.dst = access(n.dst);
        for (auto& t : n.terms) {
          t.a = expr(t.a);
          t.b = expr(t.b);
        }
        n.scale = expr(n.scale);
        n.bias = expr(n.bias);
        n.where = expr(n.where);
        if (!n.value.empty()) n.value = name(n.value);
        n.epilogue = expr(n.epilogue);
        for (auto& t : n.pair_terms) {
          t.a = expr(t.a);
          t.b = expr(t.b);
        }
        if (!n.pair_value.empty()) n.pair_value = name(n.pair_value);
        for (auto& r : n.row_axes) r = name(r);
        for (auto& c : n.column_axes) c = name(c);
        return make_stmt(std::move(n));
      }
      case StmtKind::ClusterReduce: {
        ClusterReduceNode n = *s.as<ClusterReduceNode>();
        n.buffer = name(n.buffer);
        return make_stmt(std::move(n));
      }
      case StmtKind::ClusterGather: {
        ClusterGatherNode n = *s.as<ClusterGatherNode>();
        n.src = name(n.src);
        n.dst = name(n.dst);
        return make_stmt(std::move(n));
      }
      case StmtKind::ReduceScatter: {
        ReduceScatterNode n = *s.as<ReduceScatterNode>();
        n.src = name(n.src);
        n.dst = name(n.dst);
        return make_stmt(std::move(n));
      }
      case StmtKind::DsmShuffle: {
        DsmShuffleNode n = *s.as<DsmShuffleNode>();
        n.src = name(n.src);
        n.dst = name(n.dst);
        return make_stmt(std::move(n));
      }
      case StmtKind::AllExchange: {
        AllExchangeNode n = *s.as<AllExchangeNode>();
        n.buffer = name(n.buffer);
        return make_stmt(std::move(n));
      }
      case StmtKind::InterClusterReduce: {
        InterClusterReduceNode n = *s.as<InterClusterReduceNode>();
        n.domain = domain(n.domain);
        n.dst = access(n.dst);
        n.src = access(n.src);
        return make_stmt(std::move(n));
      }
      case StmtKind::QueuePush: {
        QueuePushNode n = *s.as<QueuePushNode>();
        n.queue = name(n.queue);
        n.src = name(n.src);
        n.tag = expr(n.tag);
        return make_stmt(std::move(n));
      }
      case StmtKind::QueuePop: {
        QueuePopNode n = *s.as<QueuePopNode>();
        n.queue = name(n.queue);
        n.dst = name(n.dst);
        n.tag_var = name(n.tag_var);
        return make_stmt(std::move(n));
      }
      case StmtKind::Barrier: return s;
    }
    // A statement kind added to kernel_ir.h needs its names renamed here.
    throw std::logic_error("CUDA names: statement kind '" + std::string(stmt_kind_name(s.kind())) + "' is not handled");
  }
};

}  // namespace

bool reserved_cuda_name(const std::string& name) { return reserved_cuda_words().count(name) || derived_shape(name); }

std::string cuda_name(const std::string& name) {
  if (names_marked) return "QQ" + name + "QQ";
  if (plain_shape(name)) {
    if (!reserved_cuda_words().count(name) && !derived_shape(name)) return name;
    return name + "__";
  }
  if (name.find('$') != std::string::npos) {
    // The parser's temporaries ($sum1, docs/language.md): "d_" + the name with '$' as '_' + "__" (no
    // user name starts with "d_" and ends in "__" unmangled, and mangled ones start with "u_").
    std::string spelled;
    for (char c : name) spelled += c == '$' ? '_' : c;
    return "d_" + spelled + "__";
  }
  return "u_" + name + "__";
}

void mark_cuda_names_for_testing(bool on) { names_marked = on; }

KernelProgram with_cuda_names(const KernelProgram& program) {
  Renamer r;
  KernelProgram out = program;
  std::set<std::string> taken;  // what a kernel function may not be named: parameters, other kernels
  for (auto& g : out.globals) {
    g.name = r.name(g.name);
    taken.insert(g.name);
  }
  for (auto& k : out.kernels) {
    std::string name = r.name(k.name);
    while (taken.count(name)) name += "_kernel";
    taken.insert(name);
    k.name = name;
    for (auto& g : k.grid) g.var = r.name(g.var);
    for (auto& b : k.buffers) b.name = r.name(b.name);
    k.body = r.block(k.body);
  }
  return out;
}

}  // namespace solder
