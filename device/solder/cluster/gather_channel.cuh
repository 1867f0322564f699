// cluster::gather_channel: the all-gather of one segment size fixed at compile time (cluster size, segment bytes,
// block size), in one round, with the proof-by-data protocol of reduce_channel.cuh (read that header first).
//
// Layout of the channel's area (gather_channel_bytes(C, segment bytes) in limits.cuh; same offset in every block):
//   full[2]           per stage: one local arrival (thread 0 arms it with the round's bytes) plus the bytes that
//                     the peers' st.asyncs complete
//   slots[2][C-1][S]  receive slots: per stage, one segment of S packets per peer; the peer at distance d (rank
//                     me + d) writes slot d - 1
//
// Call k (stage s = k & 1, parity (k >> 1) & 1), every thread of every block of the cluster:
//   entry     block barrier: every earlier access of src and dst by this block precedes what follows
//   push      every thread st.asyncs its share of src into every peer's slots[s], completing their full[s]; the
//             own segment is copied into dst (unless src is already there)
//   receive   every thread waits on full[s] itself; thread 0 arms it for call k + 2; every thread copies its share
//             of the peers' segments from the slots into dst
//   exit      block barrier
//
// Why no slot is released: peer o last reads slots[s] in its call k-2; it pushes its segment of call k-1 after that
// (its call k-2 ends with a block barrier), and every thread of this block waited for that segment in call k-1
// before pushing into o's slots[s] in call k. Calls 0 and 1 are covered by the cluster barrier of setup. Parity
// waits are exact for the reason given in reduce_channel.cuh. The segments go through the slots, not straight into
// the peers' dst: this block may write a peer's dst only once the peer has finished reading it, and the only proof
// of that would be the peer's data of this same call, for which the peer would wait in turn.
//
// src and dst are generic pointers (shared or global memory); only the slots must be in shared memory.
// Usage (every thread of every block):
//   using channel = solder::cluster::gather_channel<4, 2048, 128>;      // 4 blocks, 2 KB segments, 128 threads
//   auto ch = channel::setup(smem);                                     // channel::area_bytes bytes; one cluster barrier
//   solder::cluster::cluster_gather(ch, src, dst);                      // any number of times
//   ch.teardown();                                                      // one cluster barrier
#pragma once

#include <cuda/std/cstdint>

#include "channel_common.cuh"
#include "limits.cuh"
#include "packet.cuh"
#include "ptx.cuh"

namespace solder::cluster {

template <uint32_t Cluster, uint32_t SegmentBytes, uint32_t Threads>
class gather_channel {
  static_assert(Cluster >= 1 && Cluster <= max_cluster_size, "gather_channel: cluster size must be 1 to 16");
  static_assert(detail::channel_threads_ok(Threads), "gather_channel: 32 to 1024 threads per block, in whole warps");
  static_assert(SegmentBytes > 0 && SegmentBytes % packet_bytes == 0,
                "gather_channel: segment bytes must be a positive multiple of 16");

 public:
  static constexpr uint32_t cluster_size = Cluster;
  static constexpr uint32_t segment_bytes = SegmentBytes;
  static constexpr uint32_t threads = Threads;
  static constexpr uint32_t segment_packets = SegmentBytes / packet_bytes;  // S
  static constexpr uint32_t area_bytes = gather_channel_bytes(Cluster, SegmentBytes);

  // Whole cluster, once, before the first call: initialises and arms this block's two barriers and publishes them
  // with one cluster barrier. Traps unless the block has Threads threads and the cluster Cluster blocks.
  __device__ static gather_channel setup(void* area) {
    gather_channel self = setup_unpublished(area);
    ptx::cluster_sync();
    return self;
  }

  // As setup, without the cluster barrier (reduce_channel::setup_unpublished says what the caller must do).
  __device__ static gather_channel setup_unpublished(void* area) {
    gather_channel self;
    self.thread_ = detail::thread_in_block();
    detail::require_channel_block(Threads, area);
    if (ptx::cluster_size() != Cluster) __trap();
    self.rank_ = ptx::block_rank();
    self.calls_ = 0;
    self.full_ = static_cast<uint64_t*>(area);
    self.slots_ = reinterpret_cast<uint4*>(static_cast<char*>(area) + gather_channel_barrier_bytes);
    if (self.thread_ == 0 && Cluster > 1) detail::init_armed_barriers(self.full_, 2, round_bytes);
    return self;
  }

  // Whole cluster, once, after the last call: no block leaves while a peer may still write into it.
  __device__ void teardown() const { ptx::cluster_sync(); }

  // Whole cluster: dst (Cluster x SegmentBytes) = the concatenation over ranks r of src_r (SegmentBytes), in every
  // block. src may be dst + rank x SegmentBytes (in place); otherwise src and dst must not overlap.
  __device__ void gather(const void* src, void* dst) {
    const uint4* source = static_cast<const uint4*>(src);
    uint4* destination = static_cast<uint4*>(dst);
    __syncthreads();
    const bool in_place = source == destination + rank_ * segment_packets;
    if constexpr (Cluster > 1) {
      const uint32_t stage = calls_ & 1u, parity = (calls_ >> 1) & 1u;
      ++calls_;
      push(source, stage);
      if (!in_place) copy_own(source, destination);
      ptx::wait_parity(&full_[stage], parity);
      if (thread_ == 0) ptx::arrive_expect_bytes(&full_[stage], round_bytes);
      copy_out(destination, stage);
    } else {
      if (!in_place) copy_own(source, destination);
    }
    __syncthreads();
  }

 private:
  static constexpr uint32_t packets = (Cluster - 1) * segment_packets;            // pushed and received per call
  static constexpr uint32_t round_bytes = packets * packet_bytes;

  __device__ uint32_t wrap(uint32_t x) const { return x >= Cluster ? x - Cluster : x; }  // x < 2 Cluster

  // Every thread: packets x = thread, thread + Threads, ... of the (C-1) S packets; packet x is packet x % S of src
  // for the peer at distance x / S + 1, which keeps it in slot C - 2 - x / S (this block is at distance
  // C - 1 - x / S from it).
  __device__ void push(const uint4* source, uint32_t stage) const {
    detail::for_each_packet<packets, Threads>(
        thread_, [&](uint32_t x) { return load_packet(source + x % segment_packets); },
        [&](uint32_t x, uint4 value) {
          const uint32_t distance = x / segment_packets + 1, peer = wrap(rank_ + distance);
          uint4* slot = slots_ + (stage * (Cluster - 1) + Cluster - 1 - distance) * segment_packets + x % segment_packets;
          ptx::store_async_16(ptx::map_to_rank(slot, peer), value, ptx::map_to_rank(&full_[stage], peer));
        });
  }

  // Every thread: its packets of the own segment, src -> dst + rank x S.
  __device__ void copy_own(const uint4* source, uint4* destination) const {
    for (uint32_t p = thread_; p < segment_packets; p += Threads)
      store_packet(destination + rank_ * segment_packets + p, load_packet(source + p));
  }

  // Every thread (after its wait on full[stage]): packet x of the received ones is packet x % S of the segment of
  // the rank at distance x / S + 1, in slot x / S.
  __device__ void copy_out(uint4* destination, uint32_t stage) const {
    const uint32_t received = ptx::shared_address(slots_ + stage * (Cluster - 1) * segment_packets);
    detail::for_each_packet<packets, Threads>(
        thread_, [&](uint32_t x) { return ptx::load_shared_16(received + packet_bytes * x); },
        [&](uint32_t x, uint4 value) {
          store_packet(destination + wrap(rank_ + x / segment_packets + 1) * segment_packets + x % segment_packets, value);
        });
  }

  uint64_t* full_;  // full[2]
  uint4* slots_;    // slots[2][C-1][S]
  uint32_t thread_, rank_, calls_;
};

// cluster_gather over a gather_channel: the semantics of cluster_gather over a communicator (cluster.cuh) for the
// segment size the channel was compiled for; src holds SegmentBytes, dst Cluster x SegmentBytes. Whole cluster.
template <class T, uint32_t Cluster, uint32_t SegmentBytes, uint32_t Threads>
__device__ void cluster_gather(gather_channel<Cluster, SegmentBytes, Threads>& channel, const T* src, T* dst) {
  static_assert(SegmentBytes % sizeof(T) == 0, "cluster_gather: the segment must hold whole elements");
  channel.gather(src, dst);
}

}  // namespace solder::cluster
