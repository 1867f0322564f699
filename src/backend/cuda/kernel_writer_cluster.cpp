// The generic writer (kernel_writer.h): the cluster collectives, through the device library
// (device/solder/cluster, docs/cluster-collectives.md).
//
// A kernel with collectives sets up one communicator at its top (a mailbox in dynamic shared memory,
// published with one cluster barrier) and tears it down at its end (one cluster barrier, so that no
// block exits while a peer may still write into its mailbox). An all-reduce whose tile splits into whole
// 16-byte packets per group rank goes through a reduce_channel compiled for its (group, tile bytes, 256
// threads) instead: two rounds with no slot bookkeeping (2.5x faster than the communicator for 8 KB
// tiles on the H100, bench/NOTES-cluster.md session 7); one channel per distinct shape, each with its
// own area after the mailbox, all published by the same cluster barrier. When the channels do not fit in
// shared memory, everything goes through the communicator. Each collective statement is one call, made
// by every thread of every block, on the float tiles in place:
//
//   cluster_reduce(op) buf        -> cluster_reduce<op>(channel_i, buf), or cluster_reduce<op>(comm, buf, n)
//   all_exchange(add|mul) buf G   -> all_exchange<add|mul>(channel_i, buf), or all_exchange<add|mul>(comm, buf, n, G)
//   cluster_gather src -> dst     -> cluster_gather(comm, src, dst, n)
//   reduce_scatter(op) src -> dst -> reduce_scatter<op>(comm, src, dst, n)
//   dsm_shuffle src -> dst G      -> dsm_shuffle(comm, src, dst, n, G)
//
// The library moves whole 16-byte packets (4 floats). Every tile is padded to 16 bytes in shared
// memory, so in-place collectives and shuffles run on the padded count (the padding is nobody's
// data); a gather or reduce-scatter whose segments are not whole packets goes through a scratch area
// laid out with padded segments. The library combines in fp32 in rank order and writes f32 results;
// a destination of a 16-bit dtype is rounded to it afterwards, as the executor rounds its stores.
// So the generated code computes what the executor computes: sums and products bit for bit, max and
// min with the same rule (NaN propagates, -0 < +0).
#include <algorithm>
#include <sstream>

#include "backend/cuda/kernel_writer.h"
#include "ir/diagnostics.h"

// The mailbox's size formula, shared with the device library (plain C++ there).
#include "../../../device/solder/cluster/limits.cuh"

namespace solder::generic {

namespace {

constexpr int64_t kPacketFloats = 4;             // one 16-byte packet of float tiles
constexpr int64_t kMaxSlotBytes = 8 * 1024;      // larger slots gain little for the tiles fusion makes
constexpr int64_t kMailboxBudget = 64 * 1024;    // at most this much shared memory for the mailbox
constexpr int64_t kSharedLimit = 227 * 1024;     // dynamic shared memory per block on Hopper

int64_t whole_packets(int64_t elements) { return (elements + kPacketFloats - 1) / kPacketFloats * kPacketFloats; }

std::string op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : op == ReduceOp::max ? "max" : "min";
}

// Whether a reduce_channel (device/solder/cluster/reduce_channel.cuh) serves an all-reduce of a float tile of
// `tile_bytes` (whole packets) over groups of `group` blocks: the tile splits into whole 16-byte packets per
// group rank, and the tile and the channel's area fit in shared memory on their own.
bool channel_serves(int cluster, int group, int64_t tile_bytes) {
  return group > 1 && cluster::check_reduce_channel(static_cast<unsigned>(cluster), static_cast<unsigned>(group),
                                                    static_cast<unsigned>(tile_bytes), kThreads) == nullptr;
}

// Why an all-reduce of `tile_bytes` over groups of `group` goes through the communicator instead of a channel (the
// comment the generated code carries), given that no channel was laid out for it.
std::string why_not_channel(int cluster, int group, int64_t tile_bytes) {
  if (group <= 1) return "a group of one block";
  if (const char* why = cluster::check_reduce_channel(static_cast<unsigned>(cluster), static_cast<unsigned>(group),
                                                      static_cast<unsigned>(tile_bytes), kThreads))
    return std::string("no reduce_channel: ") + why + " (tile of " + std::to_string(tile_bytes) + " bytes, groups of " +
           std::to_string(group) + ")";
  return "no reduce_channel: the channels' areas do not fit in shared memory beside the kernel's tiles and mailbox (227 KB)";
}

}  // namespace

bool KernelWriter::has_collectives() const {
  struct Finder : StmtVisitor {
    bool found = false;
    using StmtVisitor::visit;
    void visit(const ClusterReduceNode&) override { found = true; }
    void visit(const ClusterGatherNode&) override { found = true; }
    void visit(const ReduceScatterNode&) override { found = true; }
    void visit(const DsmShuffleNode&) override { found = true; }
    void visit(const AllExchangeNode&) override { found = true; }
  } f;
  f.visit(kernel_.body);
  return f.found;
}

int KernelWriter::CollectivePlan::channel_of(int group, int64_t tile_bytes) const {
  for (size_t i = 0; i < channels.size(); ++i)
    if (channels[i].group == group && channels[i].tile_bytes == tile_bytes) return static_cast<int>(i);
  return -1;
}

// Lays out the collectives' shared memory after `offset` and returns the end of the kernel's shared memory:
// with reduce_channels for the all-reduces they serve when everything fits, else everything through the
// communicator (as before the channels).
int64_t KernelWriter::plan_collectives(int64_t offset) {
  collectives_ = CollectivePlan{};
  if (!has_collectives()) return offset;
  const int64_t end = lay_out_collectives(offset, true);
  if (end >= 0) return end;
  collectives_ = CollectivePlan{};
  return lay_out_collectives(offset, false);
}

// The mailbox (when some collective needs the communicator), then the channels, then the scratch of unaligned
// gathers / reduce-scatters. The mailbox slot holds one round of the communicator's largest collective when
// that fits the mailbox budget; larger payloads take several rounds.
int64_t KernelWriter::lay_out_collectives(int64_t offset, bool with_channels) {
  const int C = kernel_.cluster;
  if (const char* why = cluster::check_cluster_size(static_cast<unsigned>(C)))
    throw Error("CUDA code generator: kernel '" + kernel_.name + "': " + why);
  int64_t round_bytes = 16, scratch_floats = 0;
  struct Sizer : StmtVisitor {
    const Kernel* kernel;
    CollectivePlan* plan;
    bool with_channels = false;
    int C = 1;
    int64_t *round_bytes, *scratch_floats;
    int64_t elements(const std::string& name) const { return kernel->find_buffer(name)->elements(); }
    void unit(int64_t bytes) {
      plan->communicator = true;
      *round_bytes = std::max(*round_bytes, bytes);
    }
    using StmtVisitor::visit;
    // A channel when one serves the shape. Otherwise, through the communicator: an all-reduce of at most
    // cluster::one_round_packets_per_thread packets per thread takes one round when a slot holds the whole tile
    // (one_round_all_reduce in device/solder/cluster/collectives.cuh); a larger one moves 1/C of the tile to each
    // peer per round.
    void all_reduce(int64_t tile_bytes, int group) {
      if (with_channels && channel_serves(C, group, tile_bytes)) {
        if (plan->channel_of(group, tile_bytes) < 0) plan->channels.push_back({group, tile_bytes, 0});
        return;
      }
      const int64_t one_round = int64_t{cluster::one_round_packets_per_thread} * cluster::packet_bytes * kThreads;
      unit(tile_bytes <= one_round ? tile_bytes : tile_bytes / group);
    }
    void visit(const ClusterReduceNode& n) override { all_reduce(whole_packets(elements(n.buffer)) * 4, C); }
    void visit(const AllExchangeNode& n) override {
      all_reduce(whole_packets(elements(n.buffer)) * 4, n.group ? n.group : C);
    }
    void visit(const DsmShuffleNode& n) override { unit(whole_packets(elements(n.src)) * 4); }
    void visit(const ClusterGatherNode& n) override {
      int64_t segment = elements(n.src);
      unit(whole_packets(segment) * 4);
      if (segment % kPacketFloats) *scratch_floats = std::max(*scratch_floats, C * whole_packets(segment));
    }
    void visit(const ReduceScatterNode& n) override {
      int64_t segment = elements(n.dst);
      unit(whole_packets(segment) * 4);
      if (segment % kPacketFloats) *scratch_floats = std::max(*scratch_floats, C * whole_packets(segment));
    }
  } sizer;
  sizer.kernel = &kernel_;
  sizer.plan = &collectives_;
  sizer.with_channels = with_channels;
  sizer.C = C;
  sizer.round_bytes = &round_bytes;
  sizer.scratch_floats = &scratch_floats;
  sizer.visit(kernel_.body);

  int64_t channel_bytes = 0;
  for (const auto& ch : collectives_.channels)
    channel_bytes += cluster::reduce_channel_bytes(static_cast<unsigned>(ch.group), static_cast<unsigned>(ch.tile_bytes));
  auto mailbox = [&](int64_t slot) {
    return static_cast<int64_t>(cluster::mailbox_bytes(static_cast<unsigned>(C), static_cast<unsigned>(slot)));
  };
  offset = (offset + 15) / 16 * 16;
  collectives_.used = true;
  collectives_.mailbox_offset = offset;
  if (collectives_.communicator) {
    int64_t slot = std::min((round_bytes + 15) / 16 * 16, kMaxSlotBytes);
    const int64_t room = std::min(kMailboxBudget, kSharedLimit - offset - channel_bytes - scratch_floats * 4);
    while (slot > 16 && mailbox(slot) > room) slot = std::max<int64_t>(16, slot / 2 / 16 * 16);
    if (mailbox(slot) > room) {
      if (with_channels && !collectives_.channels.empty()) return -1;  // retry with the communicator alone
      throw Error("CUDA code generator: kernel '" + kernel_.name + "' needs " + std::to_string(offset + scratch_floats * 4) +
                  " bytes of shared memory for its tiles, which leaves no room for the cluster collectives' mailbox (" +
                  std::to_string(mailbox(16)) + " bytes at least; 227 KB per block)");
    }
    collectives_.slot_bytes = slot;
    offset += mailbox(slot);
  }
  for (auto& ch : collectives_.channels) {
    ch.offset = offset;  // every area is a multiple of 16 bytes
    offset += cluster::reduce_channel_bytes(static_cast<unsigned>(ch.group), static_cast<unsigned>(ch.tile_bytes));
  }
  collectives_.scratch_offset = offset;
  collectives_.scratch_floats = scratch_floats;
  offset += scratch_floats * 4;
  if (!collectives_.channels.empty() && offset > kSharedLimit) return -1;
  return offset;
}

// The channels first (unpublished), then the communicator, whose setup is the one cluster barrier that
// publishes every barrier; without a communicator, an explicit cluster barrier.
void KernelWriter::collective_setup(std::ostringstream& out) {
  if (!collectives_.used) return;
  for (size_t i = 0; i < collectives_.channels.size(); ++i) {
    const auto& ch = collectives_.channels[i];
    out << "  // reduce_channel " << i << " (device/solder/cluster/reduce_channel.cuh): the all-reduces of " << ch.tile_bytes
        << "-byte tiles over groups of " << ch.group << " blocks, compiled for that shape\n";
    out << "  auto channel_" << i << " = solder::cluster::reduce_channel<" << ch.group << ", " << ch.tile_bytes << ", " << kThreads
        << ">::setup_unpublished(smem + " << ch.offset << ");\n";
  }
  if (collectives_.communicator) {
    out << "  // cluster collectives (device/solder/cluster): a mailbox of 2 stages x " << kernel_.cluster - 1 << " peers x "
        << collectives_.slot_bytes << "-byte slots, set up once by the whole cluster (one cluster barrier"
        << (collectives_.channels.empty() ? "" : ", which also publishes the channels") << ")\n";
    out << "  solder::cluster::communicator comm = solder::cluster::communicator::setup(smem + " << collectives_.mailbox_offset
        << ", " << collectives_.slot_bytes << ");\n";
  } else {
    out << "  solder::cluster::ptx::cluster_sync();  // publishes the channels' barriers (one cluster barrier)\n";
  }
  if (collectives_.scratch_floats)
    out << "  float* const collective_scratch = reinterpret_cast<float*>(smem + " << collectives_.scratch_offset
        << ");  // segments padded to 16 bytes (gather, reduce_scatter)\n";
}

void KernelWriter::collective_teardown(std::ostringstream& out) {
  if (!collectives_.used) return;
  if (collectives_.communicator)
    out << "  comm.teardown();  // no block exits while a peer may still write into its mailbox (one cluster barrier)\n";
  else
    out << "  solder::cluster::ptx::cluster_sync();  // no block exits while a peer may still write into it (one cluster barrier)\n";
}

// One call of the device library per collective (whole block, every block of the cluster). The
// library starts and ends with a block barrier.
void KernelWriter::collective(std::ostringstream& out, const Stmt& s, int indent) {
  const int C = kernel_.cluster;
  const std::string p = pad(indent);
  auto tile = [](const std::string& buffer) { return cuda_identifier(buffer); };
  auto elements = [&](const std::string& buffer) { return kernel_.find_buffer(buffer)->elements(); };
  // A destination of a 16-bit (or narrower) dtype gets the f32 result rounded to it, as the executor stores.
  auto round_to = [&](const std::string& buffer, int64_t n) {
    const Buffer* b = kernel_.find_buffer(buffer);
    if (b->dtype == DType::f32) return;
    out << p << "for (int e = threadIdx.x; e < " << n << "; e += blockDim.x) " << tile(buffer) << "[e] = " << round_function(b->dtype)
        << "(" << tile(buffer) << "[e]);\n";
    sync(out, indent);
  };
  switch (s.kind()) {
    case StmtKind::ClusterReduce: {
      auto c = s.as<ClusterReduceNode>();
      const int64_t n = elements(c->buffer);
      out << p << "// cluster_reduce(" << op_name(c->op) << ") " << c->buffer << ": every block gets the " << op_name(c->op) << " over the "
          << C << " blocks of its cluster\n";
      const int channel = collectives_.channel_of(C, whole_packets(n) * 4);
      if (channel >= 0)
        out << p << "solder::cluster::cluster_reduce<solder::cluster::reduce_op::" << op_name(c->op) << ">(channel_" << channel << ", "
            << tile(c->buffer) << ");\n";
      else
        out << p << "// through the communicator, " << why_not_channel(C, C, whole_packets(n) * 4) << "\n"
            << p << "solder::cluster::cluster_reduce<solder::cluster::reduce_op::" << op_name(c->op) << ">(comm, " << tile(c->buffer) << ", "
            << whole_packets(n) << ");\n";
      if (c->op == ReduceOp::sum) round_to(c->buffer, n);  // max/min return one of the (already rounded) values
      return;
    }
    case StmtKind::AllExchange: {
      auto c = s.as<AllExchangeNode>();
      const int64_t n = elements(c->buffer);
      const int group = c->group ? c->group : C;
      const std::string op = c->multiply ? "mul" : "add";
      out << p << "// all_exchange(" << op << ") " << c->buffer << ": every block gets the " << (c->multiply ? "product" : "sum")
          << " over its group of " << group << " consecutive ranks\n";
      const int channel = collectives_.channel_of(group, whole_packets(n) * 4);
      if (channel >= 0)
        out << p << "solder::cluster::all_exchange<solder::cluster::exchange_op::" << op << ">(channel_" << channel << ", "
            << tile(c->buffer) << ");\n";
      else
        out << p << "// through the communicator, " << why_not_channel(C, group, whole_packets(n) * 4) << "\n"
            << p << "solder::cluster::all_exchange<solder::cluster::exchange_op::" << op << ">(comm, " << tile(c->buffer) << ", "
            << whole_packets(n) << ", " << group << ");\n";
      round_to(c->buffer, n);
      return;
    }
    case StmtKind::DsmShuffle: {
      auto c = s.as<DsmShuffleNode>();
      const int64_t n = elements(c->src);
      const int group = c->group ? c->group : C;
      out << p << "// dsm_shuffle " << c->src << " -> " << c->dst << ": group rank g receives the " << c->src << " of group rank g - 1 (groups of "
          << group << ")\n";
      out << p << "solder::cluster::dsm_shuffle(comm, " << tile(c->src) << ", " << tile(c->dst) << ", " << whole_packets(n) << ", " << group
          << ");\n";
      if (kernel_.find_buffer(c->src)->dtype != kernel_.find_buffer(c->dst)->dtype) round_to(c->dst, n);
      return;
    }
    case StmtKind::ClusterGather: {
      auto c = s.as<ClusterGatherNode>();
      const int64_t n = elements(c->src), padded = whole_packets(n);
      out << p << "// cluster_gather " << c->src << " -> " << c->dst << ": " << c->dst << "[r * " << n << " + i] = " << c->src
          << " of rank r, in every block\n";
      if (n == padded) {
        out << p << "solder::cluster::cluster_gather(comm, " << tile(c->src) << ", " << tile(c->dst) << ", " << n << ");\n";
      } else {
        out << p << "solder::cluster::cluster_gather(comm, " << tile(c->src) << ", collective_scratch, " << padded
            << ");  // segments padded to 16 bytes\n";
        out << p << "for (int e = threadIdx.x; e < " << C * n << "; e += blockDim.x) " << tile(c->dst) << "[e] = collective_scratch[e / " << n
            << " * " << padded << " + e % " << n << "];\n";
        sync(out, indent);
      }
      if (kernel_.find_buffer(c->src)->dtype != kernel_.find_buffer(c->dst)->dtype) round_to(c->dst, C * n);
      return;
    }
    case StmtKind::ReduceScatter: {
      auto c = s.as<ReduceScatterNode>();
      const int64_t n = elements(c->dst), padded = whole_packets(n);
      out << p << "// reduce_scatter(" << op_name(c->op) << ") " << c->src << " -> " << c->dst << ": block r gets the " << op_name(c->op)
          << " over the cluster of " << c->src << "[r * " << n << " ...]\n";
      std::string source = tile(c->src);
      if (n != padded) {
        out << p << "for (int e = threadIdx.x; e < " << C * padded << "; e += blockDim.x) collective_scratch[e] = e % " << padded << " < " << n
            << " ? " << source << "[e / " << padded << " * " << n << " + e % " << padded << "] : 0.0f;  // segments padded to 16 bytes\n";
        source = "collective_scratch";  // the library's entry barrier orders these writes
      }
      out << p << "solder::cluster::reduce_scatter<solder::cluster::reduce_op::" << op_name(c->op) << ">(comm, " << source << ", " << tile(c->dst)
          << ", " << padded << ");\n";
      if (c->op == ReduceOp::sum || kernel_.find_buffer(c->src)->dtype != kernel_.find_buffer(c->dst)->dtype) round_to(c->dst, n);
      return;
    }
    default:
      throw Error("CUDA code generator: statement is not a cluster collective");
  }
}

}  // namespace solder::generic
