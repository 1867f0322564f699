// cluster::communicator: the per-block mailbox over distributed shared memory that every collective uses.
//
// Layout (in each block's shared memory, at the same offset in every block of the cluster):
//   full[2]            one mbarrier per stage: 1 local arrival (expect_tx of the round's token bytes) plus the
//                      16-byte tokens that the round's senders st.async into tokens[stage][...]
//   empty[2][16]       per stage and per receiver: the receiver arrives here (remotely) once it has consumed
//                      the slot this block wrote into it, so this block may write that slot again
//   tokens[2][15]      16-byte landing places of the senders' tokens
//   slots[2][C-1][S]   receive slots: per stage, one slot of S bytes per peer (slot index = distance from
//                      the source rank), so two senders never share bytes and each (sender, receiver, stage)
//                      has its own empty barrier. The ring layout has slots[2][1][S], always written by the
//                      same predecessor, for dsm_shuffle alone.
//
// Protocol of one round r (stage r & 1), every block of the cluster doing the same rounds:
//   send      for each destination: wait empty[stage][dest] (parity tracked per destination and stage), then
//             plain 16-byte stores into the destination's slot (st.shared::cluster through mapa addresses)
//   publish   block barrier; one thread per destination: fence.acq_rel.cluster (cumulative over the block's
//             stores ordered by the barrier, the pattern of cooperative_groups' grid sync), then st.async of a
//             16-byte token into the destination, completing 16 bytes on its full[stage]
//   receive   one thread: arrive.expect_tx(full[stage], 16 * number of senders); all: wait full parity (r >> 1)
//   release   block barrier, then one thread per source arrives on the source's empty[stage][me]
// Data moves by plain stores and each round costs one transaction per sender (v1 completed every 16-byte
// st.async on the receiver's barrier, which serialised on the barrier: see bench/NOTES-cluster.md).
// Two stages (ping-pong) let round r+1 be sent before round r is consumed, and a stage is rewritten only after
// its receiver released it, so an in-flight slot is never overwritten. The barriers are initialised once and
// published with one cluster barrier (setup); no collective calls a cluster-wide barrier; teardown is one
// cluster barrier so that no block exits while a peer may still write into its shared memory or barriers.
//
// Every thread of the block keeps an identical copy of the communicator (round counter, parity bits) in
// registers; this holds because all threads make the same sequence of collective calls.
#pragma once

#include <cuda/std/cstdint>

#include "limits.cuh"
#include "ptx.cuh"

namespace solder::cluster {

using cuda::std::uint32_t;
using cuda::std::uint64_t;

// A group of G consecutive cluster ranks containing this block (G divides the cluster size).
struct group_view {
  uint32_t first;  // cluster rank of group rank 0
  uint32_t size;   // G
  uint32_t local;  // this block's rank within the group

  __device__ uint32_t rank_of(uint32_t group_rank) const { return first + group_rank; }
  // The i-th peer after this block, i in 1 .. size-1; blocks start from different peers to spread traffic.
  __device__ uint32_t peer(uint32_t i) const { return first + (local + i) % size; }
  __device__ uint32_t successor() const { return peer(1); }
  __device__ uint32_t predecessor() const { return first + (local + size - 1) % size; }
};

class communicator {
 public:
  // Whole cluster, once, before any collective. `mailbox` points to mailbox_bytes(cluster size, slot_bytes,
  // layout) bytes of shared memory, 16-byte aligned, at the same offset in every block; slot_bytes is a
  // multiple of 16. A ring layout (see limits.cuh) serves only dsm_shuffle with one group size.
  __device__ static communicator setup(void* mailbox, uint32_t slot_bytes,
                                       mailbox_layout layout = mailbox_layout::all_peers) {
    communicator self;
    self.rank_ = ptx::block_rank();
    self.size_ = ptx::cluster_size();
    self.thread_ = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    self.threads_ = blockDim.x * blockDim.y * blockDim.z;
    self.full_ = static_cast<uint64_t*>(mailbox);
    self.empty_ = self.full_ + 2;
    self.tokens_ = reinterpret_cast<uint4*>(self.empty_ + 2 * max_cluster_size);
    self.slots_ = reinterpret_cast<uint4*>(static_cast<char*>(mailbox) + mailbox_barrier_bytes);
    self.slot_packets_ = slot_bytes / packet_bytes;
    self.ring_ = layout == mailbox_layout::ring;
    self.round_ = 0;
    self.send_parity_ = 0xffffffffu;  // the first wait on each empty barrier passes (phase "-1" is complete)
    if (self.thread_ == 0) {
      ptx::barrier_init(&self.full_[0], 1);
      ptx::barrier_init(&self.full_[1], 1);
      for (uint32_t i = 0; i < 2 * max_cluster_size; ++i) ptx::barrier_init(&self.empty_[i], 1);
      ptx::fence_barrier_init();
    }
    ptx::cluster_sync();  // entry protocol: no peer writes here before these barriers exist
    return self;
  }

  // Whole cluster, once, after the last collective: no block leaves while a peer may still access its
  // shared memory (the last rounds' releases are remote arrivals on the senders' barriers).
  __device__ void teardown() const { ptx::cluster_sync(); }

  __device__ uint32_t rank() const { return rank_; }
  __device__ uint32_t size() const { return size_; }
  __device__ uint32_t thread() const { return thread_; }
  __device__ uint32_t threads() const { return threads_; }
  __device__ uint32_t slot_packets() const { return slot_packets_; }
  __device__ uint32_t rounds_done() const { return round_; }
  __device__ bool ring_layout() const { return ring_; }

  __device__ group_view group(uint32_t group_size) const {
    return group_view{rank_ / group_size * group_size, group_size, rank_ % group_size};
  }

  // ---- round machinery (for collectives.cuh) -------------------------------------------------------------

  // The local slot that `source` writes in round (next + ahead).
  __device__ uint4* receive_slot(uint32_t ahead, uint32_t source) const {
    return slot_at((round_ + ahead) & 1u, index_of(source, rank_));
  }

  // Whole block. Waits until `destination` has released the slot this block writes in round (next + ahead).
  // Call once per destination and round, before the first store into that slot.
  __device__ void wait_for_slot(uint32_t ahead, uint32_t destination) {
    uint32_t bit = ((round_ + ahead) & 1u) * max_cluster_size + destination;
    ptx::wait_parity(&empty_[bit], (send_parity_ >> bit) & 1u);
    send_parity_ ^= 1u << bit;
  }

  // Any thread: generic address of the slot this block writes in `destination` in round (next + ahead).
  __device__ uint4* peer_slot(uint32_t ahead, uint32_t destination) const {
    return ptx::map_to_rank(slot_at((round_ + ahead) & 1u, index_of(rank_, destination)), destination);
  }

  // Whole block: wait_for_slot, then peer_slot.
  __device__ uint4* acquire_slot(uint32_t ahead, uint32_t destination) {
    wait_for_slot(ahead, destination);
    return peer_slot(ahead, destination);
  }

  // One thread per destination, after a block barrier that follows every store of the round: fences the
  // block's stores at cluster scope, then completes this block's part of round (next + ahead) at
  // `destination` (st.async of a 16-byte token onto its full barrier).
  __device__ void send_token(uint32_t ahead, uint32_t destination) const {
    ptx::fence_cluster();
    uint32_t stage = (round_ + ahead) & 1u;
    uint4* token = ptx::map_to_rank(&tokens_[stage * (max_cluster_size - 1) + index_of(rank_, destination)], destination);
    ptx::store_async_16(token, make_uint4(round_ + ahead, rank_, 0, 0), ptx::map_to_rank(&full_[stage], destination));
  }

  // Whole block: makes this block's stores of round (next + ahead) visible to every other block of `group`.
  __device__ void publish_to_group(uint32_t ahead, const group_view& group) const {
    __syncthreads();
    if (thread_ + 1 < group.size) send_token(ahead, group.peer(thread_ + 1));
  }

  // Whole block: as above for a single destination.
  __device__ void publish_to(uint32_t ahead, uint32_t destination) const {
    __syncthreads();
    if (thread_ == 0) send_token(ahead, destination);
  }

  // Whole block. Waits until all `senders` of the next round have published their data.
  __device__ void wait_round(uint32_t senders) {
    uint32_t stage = round_ & 1u;
    if (thread_ == 0) ptx::arrive_expect_bytes(&full_[stage], senders * packet_bytes);
    ptx::wait_parity(&full_[stage], (round_ >> 1) & 1u);
  }

  // One thread per source, after a block barrier that follows every read of the next round's slots: hands
  // the slot back to `source`.
  __device__ void release_to(uint32_t source) const {
    uint32_t bit = (round_ & 1u) * max_cluster_size + rank_;
    ptx::arrive_remote(ptx::map_to_rank(&empty_[bit], source));
  }

  // Whole block: advances to the following round (after the releases).
  __device__ void advance() { ++round_; }

  // Whole block, after consuming the next round's slots: hands them back to every other block of `group`.
  __device__ void release_round_to_group(const group_view& group) {
    __syncthreads();
    if (thread_ + 1 < group.size) release_to(group.peer(thread_ + 1));
    advance();
  }

  // Whole block: as above for a round whose only source was `source`.
  __device__ void release_round_to(uint32_t source) {
    __syncthreads();
    if (thread_ == 0) release_to(source);
    advance();
  }

 private:
  // Slot index at `receiver` of the data that `sender` writes (its distance, or 0 in a ring mailbox).
  __device__ uint32_t index_of(uint32_t sender, uint32_t receiver) const {
    return ring_ ? 0u : (sender + size_ - receiver - 1) % size_;
  }
  __device__ uint4* slot_at(uint32_t stage, uint32_t index) const {
    return slots_ + (stage * (ring_ ? 1u : size_ - 1) + index) * slot_packets_;
  }

  uint64_t* full_;
  uint64_t* empty_;
  uint4* tokens_;
  uint4* slots_;
  uint32_t rank_, size_, thread_, threads_, slot_packets_;
  bool ring_;             // mailbox_layout::ring: one slot per stage
  uint32_t round_;        // next round to receive
  uint32_t send_parity_;  // bit (stage * 16 + destination): parity to wait for on empty[stage][destination]
};

}  // namespace solder::cluster
