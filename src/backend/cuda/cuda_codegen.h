// The CUDA code generator: Kernel IR → CUDA C++ against Solder's device library (device/solder).
//
// Every kernel of a KernelProgram becomes one `extern "C" __global__` function taking every global
// tensor as a typed pointer, in KernelProgram::globals order. The logical grid is linearised onto
// blockIdx.x (Flashlight §3.6) and decoded at the top; clusters are launched as (C,1,1) along x, so a
// block's cluster rank is blockIdx.x % C, the same as the Kernel IR's (last grid variable) % C.
//
// Each kernel goes to one of two writers:
//   * the tensor-core emitter (mma_stream_codegen.h) for the streamed two-contraction shape of
//     attention: register fragments, mma.sync, ldmatrix, cp.async, mask-aware tile skipping;
//   * the generic writer (kernel_writer.h) for every other kernel, correct for every statement kind:
//     tiles (register, shared and cluster buffers alike) live in dynamic shared memory as float (i32 tiles
//     as int, exact),
//     element-wise statements are block-strided loops, large reductions give each output point a
//     group of threads, staging copies use 16-byte vectors, and block barriers go only where a
//     statement reads what another thread wrote. Collectives call the device library's DSM
//     collectives (device/solder/cluster; kernel_writer_cluster.cpp).
// The source says, per kernel, which writer took it and, for the generic one, which rule of the
// tensor-core emitter refused it. Queues are not supported yet (a clear Error). Output is readable:
// names from the program, one comment per statement saying which definition it computes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_dependencies.h"
#include "kernel/kernel_ir.h"

namespace solder {

// A kernel that runs on the sm_90a GEMM skeleton (gemm_skeleton_writer.h) takes, instead of the
// globals, (TensorMap a, TensorMap b, GemmShape, epilogue, SplitKWorkspace) where the epilogue is a
// struct of every global's pointer in KernelProgram::globals order; the launcher encodes the two tensor
// maps and provides the split-K workspace.
struct GemmSkeletonLaunch {
  struct Operand {
    size_t global = 0;      // index into KernelProgram::globals
    int dtype = 0;          // solder::gemm::Dtype / runtime::GemmDtype
    bool k_major = true;
    int64_t rows = 1, k = 1, ld = 1, batch = 1, batch_stride = 0;
    int tile_rows = 64, tile_k = 64;
    int box_k = 0;        // an MN-major box's K rows when not tile_k (Config::BBoxKRows; runtime/tma.h)
    bool swizzle = true;  // 128-byte swizzle; false: none (the attention skeleton's staged bias column)
    int64_t offset = 0;   // elements from the global's start to the map's first (a second K range's B)
  };
  Operand a, b;
  std::optional<Operand> b2;  // dual-B (a paired contract): the kernel takes B2's tensor map after B's
  // K ranges (gemm_ranges_kernel): the second range's operands; the kernel takes (a, b, a_second,
  // b_second, GemmShape with k the first range's K, k_second, epilogue, SplitKWorkspace).
  std::optional<Operand> a_second, b_second;
  int k_second = 0;
  int m = 1, n = 1, k = 1, batch = 1;
  bool broadcast_a = false, broadcast_b = false;
  std::string config;       // the Config<...> instantiated, for reports
  int stages = 0;           // the Config's ring depth
  int bm = 0, bn = 0;       // the Config's tile (0: the operands' tile_rows are the tile)
  int cluster_m = 1, cluster_n = 1;  // the Config's ClusterM / ClusterN (the launch's cluster is their product)
  std::string plan;         // the cost model's figures for the chosen Config (skeleton_choice.h)
  // Split-K (Config's SplitK): the launcher provides, once per loaded module, `workspace_floats` f32 of
  // partials and `counters` zeroed unsigned counters (solder::gemm::SplitKWorkspace; both 0 for split 1).
  int split_k = 1;
  // The tail split (Config's TailSplit, $SOLDER_GEMM_TAIL_SPLIT): the persistent grid's partial last wave
  // split over K in tail_split units each; its workspace is sized as split-K's (the tail's tiles only).
  int tail_split = 1;
  bool pingpong = false;  // the Config's Pingpong: two consumer warpgroups on alternate tiles (BM 64)
  int64_t workspace_floats = 0, counters = 0;
  // The operand-prologue path (gemm_prologue_writer.h): the kernel takes (a, b, shape, prologue,
  // epilogue), both functors holding every global's pointer in order.
  bool prologue = false;
};

// A kernel on the sm_90a attention skeleton (mma_stream_codegen.h, generate_attention_skeleton_kernel)
// takes (TensorMap q, TensorMap k, TensorMap v, AttentionShape, score, mask, epilogue), each functor a
// struct of every global's pointer in KernelProgram::globals order; the launcher encodes the three
// tensor maps (runtime::encode_gemm_operand: K-major, rows = the sequence, k = the head dim).
// With a staged bias (functors.cuh, kStagedBias) the score functor starts with two tensor maps, the
// bias tile's and the bias column's (bias_tile / bias_column; an absent one is left zero), then the
// pointers: the launcher passes that struct (2 × 128 bytes + the pointers) as the score argument.
struct AttentionSkeletonLaunch {
  GemmSkeletonLaunch::Operand q, k, v;
  std::optional<GemmSkeletonLaunch::Operand> bias_tile, bias_column;  // a staged bias's tensor maps
  // the output's map of a TMA-stored epilogue (functors.cuh kTmaStore; $SOLDER_ATTN_O_STORE=tma): o as
  // {HeadDim, seq_q, batch · heads}, box {64, 16, 1}
  std::optional<GemmSkeletonLaunch::Operand> out;
  int batch = 1, heads = 1, heads_kv = 1, seq_q = 1, seq_k = 1;  // solder::attention::AttentionShape
  // an operand's batch coordinate b · X_heads + X_head0 + h (0: the plain layout; AttentionShape)
  int q_heads = 0, q_head0 = 0, k_heads = 0, k_head0 = 0, v_heads = 0, v_head0 = 0;
  std::string config;  // the Config<...> instantiated, for reports
};

struct GeneratedKernel {
  std::string name;
  int64_t blocks = 1;
  int cluster = 1;
  int threads = 256;
  int64_t shared_bytes = 0;  // dynamic shared memory per block
  std::optional<GemmSkeletonLaunch> gemm;  // runs on the GEMM skeleton
  std::optional<AttentionSkeletonLaunch> attention;  // runs on the attention skeleton
  // Launched with programmatic dependent launch (runtime::LaunchConfig::programmatic): the kernel waits
  // for the previous one (griddepcontrol.wait) before touching global memory. The GEMM skeleton's
  // kernels (gemm_body) do; $SOLDER_PDL=0 turns the attribute off for A/B runs.
  bool programmatic = false;
  // The globals the launch reads and writes (its kernels' Kernel IR, kernel_dependencies.h): launches
  // without a conflict may run concurrently (cuda_backend.cpp). Attention-skeleton launches also write
  // the module's work counter, which they share.
  GlobalUse globals;
};

// How the CUDA backend runs one `contract` statement: the skeleton that took it, the tile, the MMA
// input type T, and for a scalar one the rule that kept it off the tensor cores. generate_cuda decides
// it (the writer that takes each kernel, then, in the generic writer, each reduce) and records it;
// `solder emit --report` and `--json` print it, and every kernel's comment header in the source names it.
struct ContractionSchedule {
  // The skeletons, by name.
  static constexpr const char* kGemmSkeleton = "sm90 GEMM skeleton";      // whole, on TMA + wgmma
  static constexpr const char* kGemmPrologue = "sm90 GEMM skeleton, operand prologue";  // computed A, wgmma SS
  static constexpr const char* kAttentionSkeleton = "sm90 attention skeleton";  // TMA, K/V ring, wgmma SS + RS
  static constexpr const char* kAttentionWgmma = "attention wgmma";       // the tensor-core emitter
  static constexpr const char* kAttentionMmaSync = "attention mma.sync";  // the tensor-core emitter
  static constexpr const char* kGatheredGemm = "mma.sync implicit GEMM";  // whole, gathered operands (gathered_gemm_writer.h)
  static constexpr const char* kMmaSync = "mma.sync";                     // the generic writer's block_gemm
  static constexpr const char* kScalar = "scalar";                        // the generic writer's loop
  std::string kernel, contraction;   // the kernel and the contract's destination, as the source names them
  std::string skeleton;              // one of the names above
  std::string tile;                  // "BM 128 x BN 256 x BK 64, 4 stages", ...; "" when scalar
  std::string type;                  // T, the MMA input type of the contract ("bf16", "f16", "e4m3", ...)
  // The contract's extents in its kernel, per block and step: batch, rows, columns, depth. The kernel
  // runs it in `blocks` blocks, `steps` times each (the trips of the loops around it; an upper bound
  // where a loop's start depends on the block).
  int64_t batch = 1, m = 1, n = 1, k = 1;
  int64_t blocks = 1, steps = 1;
  std::string reason;                // scalar: the rule that refused the tensor cores; attention skeleton: its work
                                     // tiles and which key tiles are skipped by what rule
  std::string figures;               // the cost model's figures: the skeleton's prediction; the roofline floor
                                     // of the kernel's whole work on it (plan/roofline.h)
  bool scalar() const { return skeleton == kScalar; }
};

// One line per contraction ("e e: sm90 GEMM skeleton, tile BM 128 x BN 64 x BK 64, 5 stages, T f16,
// M 128 N 3072 K 8192 (48 blocks); cost model: ..."), and a JSON array of objects with the fields above.
std::string contraction_schedule_text(const std::vector<ContractionSchedule>& schedule);
std::string contraction_schedule_json(const std::vector<ContractionSchedule>& schedule);

struct GeneratedModule {
  std::string source;
  std::vector<GeneratedKernel> kernels;
  std::vector<ContractionSchedule> contractions;  // every contract of the program, in kernel order
  std::vector<std::string> parameters;  // global tensors, in parameter order
  // The source checks data-dependent indices (cuda_expr.h, solder_checked_index): read
  // kIndexErrorVariable after the launches.
  bool checks_indices = false;
};

// What the generator may use beyond its own writers. The attention skeleton (device/solder/attention)
// is CuTe code: where the CUTLASS/CuTe headers are missing it is turned off (skeletons_here(),
// cuda_backend.h). Empty: on; otherwise why it is off, which each attention kernel's comment gives.
struct CudaCodegenOptions {
  std::string attention_skeleton_off;
};

// Throws Refusal (support/refusal.h) when a kernel's launch exceeds a limit of the hardware
// (check_launch_limits).
GeneratedModule generate_cuda(const KernelProgram& program, const CudaCodegenOptions& options = {});

// The launch limits of sm_90 (CUDA programming guide, "Compute capabilities"): at most 2^31 - 1
// blocks along x (the logical grid is linearised onto x; 65535 along y and z, which are not used),
// 1024 threads per block, a cluster of at most 16 blocks (non-portable size) that divides the grid,
// and 227 KB (232,448 bytes) of dynamic shared memory per block. Returns "" when `kernel` is within
// them, otherwise the reason.
std::string launch_limit_violation(const GeneratedKernel& kernel);

// The C++ element type of a global of this dtype ("float", "__nv_bfloat16", ...).
std::string_view cuda_element_type(DType dtype);

// A kernel's parameter list after its "(": one pointer per global, in order, "const" for inputs, each
// __restrict__ and named by cuda_identifier, one per line. Every writer's kernels take the same list.
std::string cuda_global_parameters(const std::vector<GlobalTensor>& globals);

}  // namespace solder
