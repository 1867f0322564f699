// Sizes and argument checks for the cluster collectives.
//
// Include-free and usable from host C++ (the planner, the launch code), from nvcc and from NVRTC. Every
// check returns nullptr when the arguments are valid and otherwise a sentence naming what was expected and
// what was found, so the planner can reject a plan with a reason instead of failing a launch.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOLDER_CLUSTER_HOST_DEVICE __host__ __device__
#else
#define SOLDER_CLUSTER_HOST_DEVICE
#endif

namespace solder::cluster {

// Largest cluster on Hopper: 8 portable, 16 with cudaFuncAttributeNonPortableClusterSizeAllowed.
inline constexpr unsigned max_cluster_size = 16;
inline constexpr unsigned max_portable_cluster_size = 8;

// Every transfer moves 16-byte packets (one st.async.v4.b32 per thread).
inline constexpr unsigned packet_bytes = 16;

// Barrier area at the start of a mailbox, 8 bytes each: full[2] + empty[2][max_cluster_size] (the slot
// protocol), then direct_full[2] + ready[max_cluster_size] (transport::direct; direct_full[1] is padding so that
// the slots stay 16-byte aligned).
inline constexpr unsigned mailbox_barrier_bytes = 8 * (2 + 2 * max_cluster_size + 2 + max_cluster_size);

// An all-reduce whose tile fits one mailbox slot and has at most this many packets per thread takes one round
// instead of two (collectives.cuh, one_round_all_reduce). Measured on the H100 (bench/NOTES-cluster.md, session
// 5; 4 blocks of 128 threads, fp16, in kernel): 1 packet per thread 1.76 -> 0.91 us, 2 per thread 1.78 ->
// 1.52 us, 4 per thread 1.86 -> 2.50 us (slower: three times the tile on the wire). The code generator sizes
// such all-reduces' slots to the whole tile.
#ifndef SOLDER_CLUSTER_ONE_ROUND_PACKETS_PER_THREAD
#define SOLDER_CLUSTER_ONE_ROUND_PACKETS_PER_THREAD 2
#endif
inline constexpr unsigned one_round_packets_per_thread = SOLDER_CLUSTER_ONE_ROUND_PACKETS_PER_THREAD;

// How a mailbox lays out its receive slots.
//   all_peers  one slot per peer and stage: serves every collective.
//   ring       one slot per stage, always written by the same predecessor: serves only dsm_shuffle, with one
//              group size for the communicator's whole life (so slots can be C-1 times larger).
enum class mailbox_layout : unsigned { all_peers, ring };

// How data moves into a peer's slot.
//   store_async  every thread st.asyncs 16-byte packets from registers (the source may change at once).
//   bulk_copy    for tiles in shared memory, one thread per destination issues one cp.async.bulk of the whole
//                slice (the copy engine reads the source asynchronously; the collective waits for the
//                receivers' releases of its last rounds before it returns, so inputs may still be
//                overwritten after the call). Tiles in global memory fall back to store_async.
//   direct       store_async, but where the destination is a tile in shared memory the data goes straight into
//                the peer's tile instead of a slot (no slot, no copy-out): cluster_gather pushes into every
//                peer's dst after an entry handshake (each receiver signals that its dst may be written), in one
//                round whatever the size; the all-gather half of cluster_reduce / all_exchange writes the
//                reduced slices into the peers' tiles. Other collectives, and tiles in global memory, as
//                store_async. Measured against store_async in bench/NOTES-cluster.md (session 4).
enum class transport : unsigned { store_async, bulk_copy, direct };

SOLDER_CLUSTER_HOST_DEVICE constexpr unsigned mailbox_peer_slots(unsigned cluster_size, mailbox_layout layout) {
  if (cluster_size <= 1) return 0;
  return layout == mailbox_layout::ring ? 1u : cluster_size - 1;
}

// Shared-memory bytes of a mailbox for `cluster_size` blocks with receive slots of `slot_bytes`:
// two stages (ping-pong) of one slot per peer (or one slot for a ring), plus the barriers.
SOLDER_CLUSTER_HOST_DEVICE constexpr unsigned mailbox_bytes(unsigned cluster_size, unsigned slot_bytes,
                                                            mailbox_layout layout = mailbox_layout::all_peers) {
  return mailbox_barrier_bytes + 2u * mailbox_peer_slots(cluster_size, layout) * slot_bytes;
}

// Largest slot that fits `budget_bytes` of shared memory, rounded down to whole packets (0 if none fits).
SOLDER_CLUSTER_HOST_DEVICE constexpr unsigned slot_bytes_for_budget(unsigned cluster_size, unsigned budget_bytes,
                                                                    mailbox_layout layout = mailbox_layout::all_peers) {
  unsigned slots = 2u * mailbox_peer_slots(cluster_size, layout);
  if (slots == 0 || budget_bytes <= mailbox_barrier_bytes) return 0;
  unsigned per_slot = (budget_bytes - mailbox_barrier_bytes) / slots;
  return per_slot / packet_bytes * packet_bytes;
}

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_cluster_size(unsigned cluster_size) {
  if (cluster_size == 0) return "cluster size must be at least 1, found 0";
  if (cluster_size > max_cluster_size)
    return "cluster size must be at most 16 blocks on Hopper (8 portable, 16 non-portable)";
  return nullptr;  // any size 1..16 is supported, powers of two or not
}

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_group(unsigned cluster_size, unsigned group_size) {
  if (group_size == 0) return "group size must be at least 1, found 0";
  if (group_size > cluster_size) return "group size must not exceed the cluster size";
  if (cluster_size % group_size != 0) return "group size must divide the cluster size (groups are consecutive ranks)";
  return nullptr;
}

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_tile(unsigned count, unsigned element_bytes) {
  if (element_bytes != 2 && element_bytes != 4) return "element type must be float, __nv_bfloat16 or __half";
  if ((static_cast<unsigned long long>(count) * element_bytes) % packet_bytes != 0)
    return "tile bytes (count * sizeof(T)) must be a multiple of 16 (4 floats or 8 16-bit elements)";
  return nullptr;
}

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_slot(unsigned cluster_size, unsigned slot_bytes) {
  if (cluster_size > 1 && slot_bytes < packet_bytes) return "mailbox slot must hold at least one 16-byte packet";
  if (slot_bytes % packet_bytes != 0) return "mailbox slot bytes must be a multiple of 16";
  return nullptr;
}

// ---- reduce_channel (reduce_channel.cuh): the all-reduce of one tile shape fixed at compile time ----------

// Barrier area at the start of a reduce_channel's area: reduce_scatter_full[2] + all_gather_full[2], 8 bytes each,
// padded to 64 bytes.
inline constexpr unsigned reduce_channel_barrier_bytes = 64;

// Shared-memory bytes of a reduce_channel for groups of `group_size` blocks and tiles of `tile_bytes`: the
// barriers, then two stages of one receive slot per peer, each holding one slice (tile_bytes / group_size).
SOLDER_CLUSTER_HOST_DEVICE constexpr unsigned reduce_channel_bytes(unsigned group_size, unsigned tile_bytes) {
  if (group_size <= 1) return reduce_channel_barrier_bytes;
  return reduce_channel_barrier_bytes + 2u * (group_size - 1) * (tile_bytes / group_size);
}

// Whether a reduce_channel can serve this shape: nullptr, or what was expected and what was found. The channel
// needs the whole tile in shared memory (at the same offset in every block), whole 16-byte packets in every
// one of the group's slices, and the block size it was compiled for.
SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_reduce_channel(unsigned cluster_size, unsigned group_size,
                                                                      unsigned tile_bytes, unsigned threads) {
  if (const char* why = check_cluster_size(cluster_size)) return why;
  if (const char* why = check_group(cluster_size, group_size)) return why;
  if (threads < 32 || threads % 32 != 0 || threads > 1024)
    return "reduce_channel needs 32 to 1024 threads per block, in whole warps";
  if (tile_bytes == 0) return "reduce_channel needs a tile of at least one 16-byte packet per group rank, found 0 bytes";
  if (tile_bytes % (packet_bytes * group_size) != 0)
    return "reduce_channel needs tile bytes divisible by 16 x the group size (whole 16-byte packets in every slice)";
  if (static_cast<unsigned long long>(tile_bytes) + reduce_channel_bytes(group_size, tile_bytes) > 227u * 1024u)
    return "reduce_channel needs the tile and its area in shared memory: tile + 2 (G-1)/G x tile + 64 bytes must "
           "fit 227 KB";
  return nullptr;
}

// ---- gather_channel (gather_channel.cuh): the all-gather of one segment size fixed at compile time ----------

// Barrier area at the start of a gather_channel's area: full[2], 8 bytes each, padded to 64 bytes.
inline constexpr unsigned gather_channel_barrier_bytes = 64;

// Shared-memory bytes of a gather_channel for `cluster_size` blocks and segments of `segment_bytes`: the barriers,
// then two stages of one receive slot per peer, each holding one segment.
SOLDER_CLUSTER_HOST_DEVICE constexpr unsigned gather_channel_bytes(unsigned cluster_size, unsigned segment_bytes) {
  if (cluster_size <= 1) return gather_channel_barrier_bytes;
  return gather_channel_barrier_bytes + 2u * (cluster_size - 1) * segment_bytes;
}

// Whether a gather_channel can serve this shape: nullptr, or what was expected and what was found. Its area must
// fit in shared memory beside `other_shared_bytes` (the kernel's tiles).
SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_gather_channel(unsigned cluster_size, unsigned segment_bytes,
                                                                      unsigned threads, unsigned other_shared_bytes = 0) {
  if (const char* why = check_cluster_size(cluster_size)) return why;
  if (threads < 32 || threads % 32 != 0 || threads > 1024)
    return "gather_channel needs 32 to 1024 threads per block, in whole warps";
  if (segment_bytes == 0 || segment_bytes % packet_bytes != 0)
    return "gather_channel needs segments of whole 16-byte packets (4 floats or 8 16-bit elements)";
  if (static_cast<unsigned long long>(other_shared_bytes) + gather_channel_bytes(cluster_size, segment_bytes) > 227u * 1024u)
    return "gather_channel needs its area (64 bytes + 2 (C-1) x the segment) in shared memory beside the tiles: "
           "more than 227 KB";
  return nullptr;
}

SOLDER_CLUSTER_HOST_DEVICE constexpr const char* check_threads(unsigned threads_per_block) {
  if (threads_per_block < 32 || threads_per_block % 32 != 0)
    return "collectives need whole warps and at least 32 threads per block";
  return nullptr;
}

}  // namespace solder::cluster
