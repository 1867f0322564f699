// cluster::reduce_channel: the all-reduce of one tile shape fixed at compile time (group size, tile bytes, block
// size), for kernels that repeat it, with a protocol that needs no slot releases.
//
// Why a second protocol. The communicator's slot protocol (mailbox.cuh) serves every collective, every size and
// tiles in global memory. Its 8 KB all-reduce at 128 threads issues ~560 instructions per warp and call, most of
// them bookkeeping (slot waits and releases, parity bits, chunk splits; bench/NOTES-cluster.md, session 6), and
// is bound by their latency. When the shape is known at compile time and the tile lives in shared memory, the
// all-reduce needs two rounds and two waits and nothing else: every loop below has compile-time bounds, and the
// proof that a buffer may be written again comes with the data that a block waits for anyway.
//
// Layout of the channel's area (reduce_channel_bytes(G, tile bytes) in limits.cuh; same offset in every block):
//   scatter_full[2]   per stage: one local arrival (thread 0 arms it with the round's bytes) plus the bytes that the
//                     peers' reduce-scatter st.asyncs complete
//   gather_full[2]    per stage: the same for the all-gather st.asyncs, which go straight into this block's tile
//   slots[2][G-1][S]  reduce-scatter receive slots: per stage, one slice of S packets per peer; the peer at
//                     distance d (group rank me + d) writes slot d - 1
//
// Call k (stage s = k & 1, parity (k >> 1) & 1), every thread of every block of the cluster:
//   entry     block barrier: every earlier access of the tile by this block precedes what follows
//   scatter   every thread st.asyncs its share of the slices owned by the peers into their slots[s], completing
//             their scatter_full[s]
//   combine   every thread waits on scatter_full[s] itself (no block barrier hands the wait on); thread 0 arms it
//             for call k + 2; each thread combines its packets of this block's slice over the group in rank order
//             (fp32, one rounding: the bits of cluster_reduce), stores them into its tile and st.asyncs them into
//             every peer's tile at the same offset, completing the peer's gather_full[s]
//   gather    every thread waits on gather_full[s]; thread 0 arms it for call k + 2; block barrier (this block's
//             slice, written by all threads, is then visible to all of them)
//
// Why no buffer is ever released. A block writes into a peer only after receiving data that the peer sent after
// its last access of the bytes written (st.async completes its transactions with release semantics at cluster
// scope, and every writing thread acquired them by its own wait):
//   - peer o last reads slots[s] in its call k-2; it sends its all-gather data of call k-1 after that (its call
//     k-2 ends with a block barrier), and every thread of this block waited for that data in call k-1 before
//     scattering into o's slots[s] in call k;
//   - peer o last reads its slice `me` of its tile in its scatter of call k (to send it to me), and accesses it
//     again only after its gather wait of call k; this block writes it only after receiving o's scatter of k.
// Calls 0 and 1 are covered by the cluster barrier of setup. Parity waits are exact: no barrier of a block can
// complete the phase of call k + 2 before every thread of that block has passed its wait of call k, since the
// peers' data of call k + 2 follows this block's data of call k + 1. (The communicator's protocol, by contrast,
// must hand every slot back, because its slots serve collectives of any size in any order.)
//
// Usage (every thread of every block; the tile at the same shared-memory offset in every block):
//   using channel = solder::cluster::reduce_channel<4, 8192, 128>;     // groups of 4 blocks, 8 KB tiles
//   __shared__ alignas(16) unsigned char area[channel::area_bytes];     // or part of the dynamic shared memory
//   auto ch = channel::setup(area);                                      // one cluster barrier
//   solder::cluster::cluster_reduce<solder::cluster::reduce_op::sum>(ch, tile);   // any number of times
//   ch.teardown();                                                       // one cluster barrier
// The host checks a shape with check_reduce_channel (limits.cuh); setup traps on a block size, cluster size or
// tile placement it was not compiled for.
#pragma once

#include <cuda/std/cstdint>

#include "channel_common.cuh"
#include "collectives.cuh"
#include "limits.cuh"
#include "packet.cuh"
#include "ptx.cuh"

namespace solder::cluster {

template <uint32_t Group, uint32_t TileBytes, uint32_t Threads>
class reduce_channel {
  static_assert(Group >= 1 && Group <= max_cluster_size, "reduce_channel: group size must be 1 to 16");
  static_assert(detail::channel_threads_ok(Threads), "reduce_channel: 32 to 1024 threads per block, in whole warps");
  static_assert(TileBytes > 0 && TileBytes % (packet_bytes * Group) == 0,
                "reduce_channel: tile bytes must be divisible by 16 x the group size");

 public:
  static constexpr uint32_t group_size = Group;
  static constexpr uint32_t tile_bytes = TileBytes;
  static constexpr uint32_t threads = Threads;
  static constexpr uint32_t slice_packets = TileBytes / packet_bytes / Group;  // S
  static constexpr uint32_t area_bytes = reduce_channel_bytes(Group, TileBytes);

  // Whole cluster, once, before the first call: initialises and arms this block's four barriers and publishes
  // them with one cluster barrier. `area`: area_bytes of shared memory, 16-byte aligned, at the same offset in
  // every block. Traps unless the block has Threads threads and the cluster size is a multiple of Group.
  __device__ static reduce_channel setup(void* area) {
    reduce_channel self = setup_unpublished(area);
    ptx::cluster_sync();
    return self;
  }

  // As setup, without the cluster barrier: for a kernel that sets up several channels (or a channel and a
  // communicator) and publishes them all with one. The caller must make every thread of every block of the
  // cluster pass one cluster barrier (ptx::cluster_sync, or communicator::setup) before the first call.
  __device__ static reduce_channel setup_unpublished(void* area) {
    reduce_channel self;
    self.thread_ = detail::thread_in_block();
    detail::require_channel_block(Threads, area);
    if (ptx::cluster_size() % Group != 0) __trap();
    const uint32_t rank = ptx::block_rank();
    self.local_ = rank % Group;
    self.first_ = rank - self.local_;
    self.calls_ = 0;
    self.barriers_ = static_cast<uint64_t*>(area);
    self.slots_ = reinterpret_cast<uint4*>(static_cast<char*>(area) + reduce_channel_barrier_bytes);
    if (self.thread_ == 0 && Group > 1) detail::init_armed_barriers(self.barriers_, 4, round_bytes);
    return self;
  }

  // Whole cluster, once, after the last call: no block leaves while a peer may still write into it.
  __device__ void teardown() const { ptx::cluster_sync(); }

  // Whole cluster: in place, every block of each group of Group consecutive ranks ends with op over the group's
  // tiles, element-wise, accumulated in fp32 in group-rank order and rounded once to T. `tile`: TileBytes bytes
  // of this block's shared memory, at the same offset in every block. Op in {sum, max, min, prod}.
  template <reduce_op Op, class T>
  __device__ void all_reduce(T* tile) {
    static_assert(is_collective_element<T>, "element type must be float, __nv_bfloat16 or __half");
    __syncthreads();
    if constexpr (Group > 1) {
      if (!ptx::is_shared(tile)) __trap();
      const uint32_t stage = calls_ & 1u, parity = (calls_ >> 1) & 1u;
      ++calls_;
      uint4* data = reinterpret_cast<uint4*>(tile);
      scatter(ptx::shared_address(tile), stage);
      ptx::wait_parity(&barriers_[stage], parity);
      if (thread_ == 0) ptx::arrive_expect_bytes(&barriers_[stage], round_bytes);
      combine_and_gather<Op, T>(data, ptx::shared_address(tile), stage);
      ptx::wait_parity(&barriers_[2 + stage], parity);
      if (thread_ == 0) ptx::arrive_expect_bytes(&barriers_[2 + stage], round_bytes);
      __syncthreads();
    }
  }

 private:
  static constexpr uint32_t round_bytes = (Group - 1) * slice_packets * packet_bytes;  // received per round

  __device__ uint32_t wrap(uint32_t x) const { return x >= Group ? x - Group : x; }  // x < 2 Group

  // Every thread: packets x = thread, thread + Threads, ... of the (G-1) S packets this block scatters; packet x
  // is packet x % S of the slice of the peer at distance x / S + 1, and goes into that peer's slot G - 2 - x / S
  // (this block is at distance G - 1 - x / S from it).
  __device__ void scatter(uint32_t data_address, uint32_t stage) const {
    detail::for_each_packet<(Group - 1) * slice_packets, Threads>(
        thread_,
        [&](uint32_t x) {
          const uint32_t owner = wrap(local_ + x / slice_packets + 1);
          return ptx::load_shared_16(data_address + packet_bytes * (owner * slice_packets + x % slice_packets));
        },
        [&](uint32_t x, uint4 value) {
          const uint32_t distance = x / slice_packets + 1, peer = first_ + wrap(local_ + distance);
          uint4* slot = slots_ + (stage * (Group - 1) + Group - 1 - distance) * slice_packets + x % slice_packets;
          ptx::store_async_16(ptx::map_to_rank(slot, peer), value, ptx::map_to_rank(&barriers_[stage], peer));
        });
  }

  // Every thread (after its wait on scatter_full[stage]): packets p = thread, thread + Threads, ... < S of this
  // block's slice, combined over the group in rank order, stored, and st.asynced into every peer's tile.
  template <reduce_op Op, class T>
  __device__ void combine_and_gather(uint4* data, uint32_t data_address, uint32_t stage) const {
    uint4* mine = data + local_ * slice_packets;
    const uint32_t mine_address = data_address + packet_bytes * local_ * slice_packets;
    const uint32_t received = ptx::shared_address(slots_ + stage * (Group - 1) * slice_packets);
#pragma unroll
    for (uint32_t p0 = 0; p0 < slice_packets; p0 += Threads) {
      const uint32_t p = p0 + thread_;
      if (slice_packets % Threads != 0 && p >= slice_packets) break;
      unpacked<T> accumulator;
#pragma unroll
      for (uint32_t r = 0; r < Group; ++r) {
        // Group rank r is at distance (r - me) mod G and wrote slot distance - 1.
        const uint32_t distance = wrap(r + Group - local_);
        const uint4 value = ptx::load_shared_16(distance == 0 ? mine_address + packet_bytes * p
                                                              : received + packet_bytes * ((distance - 1) * slice_packets + p));
        if (r == 0) accumulator = unpack<T>(value);
        else combine_into<Op>(accumulator, unpack<T>(value));
      }
      const uint4 result = pack<T>(accumulator);
      ptx::store_shared_16(mine_address + packet_bytes * p, result);
#pragma unroll
      for (uint32_t d = 1; d < Group; ++d) {
        const uint32_t peer = first_ + wrap(local_ + d);
        ptx::store_async_16(ptx::map_to_rank(mine + p, peer), result, ptx::map_to_rank(&barriers_[2 + stage], peer));
      }
    }
  }

  uint64_t* barriers_;  // scatter_full[2], gather_full[2]
  uint4* slots_;        // slots[2][G-1][S]
  uint32_t thread_, local_, first_, calls_;
};

// cluster_reduce over a reduce_channel: the semantics of cluster_reduce over a communicator (cluster.cuh), for
// the shape the channel was compiled for. Whole cluster; traps unless Group is the cluster size.
template <reduce_op Op, class T, uint32_t Group, uint32_t TileBytes, uint32_t Threads>
__device__ void cluster_reduce(reduce_channel<Group, TileBytes, Threads>& channel, T* tile) {
  static_assert(Op == reduce_op::sum || Op == reduce_op::max || Op == reduce_op::min,
                "cluster_reduce takes sum, max or min");
  if (ptx::cluster_size() != Group) __trap();
  channel.template all_reduce<Op>(tile);
}

// all_exchange<add|mul> over a reduce_channel: the semantics of all_exchange over a communicator, in groups of
// the channel's Group consecutive ranks. Whole cluster.
template <exchange_op Op, class T, uint32_t Group, uint32_t TileBytes, uint32_t Threads>
__device__ void all_exchange(reduce_channel<Group, TileBytes, Threads>& channel, T* tile) {
  channel.template all_reduce<Op == exchange_op::add ? reduce_op::sum : reduce_op::prod>(tile);
}

}  // namespace solder::cluster
