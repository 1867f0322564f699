// cluster::communicator: the per-block mailbox over distributed shared memory that every collective uses.
//
// Layout (in each block's shared memory, at the same offset in every block of the cluster):
//   full[2]            one mbarrier per stage: 1 local arrival (expect_tx of the round's bytes) plus the bytes
//                      that the senders' st.async stores complete on it
//   empty[2][16]       per stage and per receiver: the receiver arrives here (remotely) once it has consumed
//                      the slot this block wrote into it, so this block may write that slot again
//   direct_full[2]     transport::direct: one mbarrier (direct_full[1] is padding) completed by the pushes
//                      straight into this block's destination tile (cluster_gather), one phase per call
//   ready[16]          transport::direct: per receiver, who arrives here (remotely) on entering a direct
//                      gather, so this block may write into that receiver's destination tile
//   slots[2][C-1][S]   receive slots: per stage, one slot of S bytes per peer (slot index = distance from
//                      the source rank), so two senders never share bytes and each (sender, receiver, stage)
//                      has its own empty barrier. The ring layout has slots[2][1][S], always written by the
//                      same predecessor, for dsm_shuffle alone.
//
// Protocol of one round r (stage r & 1), every block of the cluster doing the same rounds:
//   send      one thread per destination waits empty[stage][dest] (parity tracked per
//             destination and stage), block barrier; then every thread st.asyncs 16-byte packets into the
//             destinations' slots, each completing 16 bytes on the destination's full[stage]
//   receive   one thread: arrive.expect_tx(full[stage], bytes of the round) and wait for parity (r >> 1);
//             block barrier
//   release   block barrier after the last read of the slots; one thread per source arrives remotely on the
//             source's empty[stage][me]
// Barrier semantics (v4): release/acquire at CTA scope, as CUTLASS's cluster pipelines; the data is ordered by
// the transaction mechanism (ptx.cuh, SOLDER_CLUSTER_SCOPE_FENCES restores cluster scope, ~2x slower).
// With transport::bulk_copy, one thread per destination sends a whole slice by cp.async.bulk instead.
// Two stages (ping-pong) let round r+1 be sent before round r is consumed, and a stage is rewritten only after
// its receiver released it, so an in-flight slot is never overwritten. Since st.async reads its value from
// registers, a sender's source may change as soon as the stores are issued. The barriers are initialised
// once and published with one cluster barrier (setup); no collective calls a cluster-wide barrier; teardown is
// one cluster barrier so that no block exits while a peer may still write into its shared memory or barriers.
// Waits are done by one thread per barrier and handed to the block by a block barrier.
//
// Direct gather (transport::direct, shared-memory destination), one phase per call on direct_full and on every
// ready barrier: at entry, one thread per peer arrives on the peer's ready[me] (my destination may be written:
// the block barrier before it ordered every earlier access of it); one thread per destination waits ready[dest]
// and a block barrier hands the waits on; every thread st.asyncs into the destinations' tiles, completing
// their direct_full; one thread expects (C-1) x the bytes on its own direct_full and waits. A receiver arrives
// on ready at most once more than its sender has waited (its next entry follows the data of this call), and
// pushes of call n+1 follow the receiver's entry of call n+1, which follows its phase n: no phase is lost.
//
// Every thread of the block keeps an identical copy of the communicator (round counter, parity bits) in
// registers; this holds because all threads make the same sequence of collective calls.
#pragma once

#include <cuda/std/cstdint>

#include "limits.cuh"
#include "ptx.cuh"
#include "trace.cuh"

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
  // (No `%` here or in index_of: a modulo by a run-time value is a ~20-instruction sequence, and these run in
  // every round's critical path; both operands are below 2 * size, so one conditional subtraction is exact.)
  __device__ uint32_t peer(uint32_t i) const { return first + wrap(local + i); }
  __device__ uint32_t successor() const { return peer(1); }
  __device__ uint32_t predecessor() const { return first + wrap(local + size - 1); }
  // x mod size for x < 2 * size.
  __device__ uint32_t wrap(uint32_t x) const { return x >= size ? x - size : x; }
};

// Where this block writes in a peer during one round.
struct remote_slot {
  uint4* data;        // generic address of the slot in the peer's shared memory
  uint64_t* barrier;  // the peer's full barrier for the round's stage
};

// How one thread takes part in a round's pushes to the G-1 other blocks of a group (destination i is
// group.peer(i), i = 1 .. G-1): it serves destinations first, first + step, ... < G, and in each the packets
// lane, lane + lanes, ... . Whole warps serve one destination when the block has at least G-1 warps (so the
// destinations' packets go out in parallel, not one destination after another; v6), else each warp serves
// several destinations in turn.
struct push_share {
  uint32_t first, step, lane, lanes;

  __device__ static push_share make(uint32_t threads, uint32_t thread, uint32_t destinations) {
    const uint32_t warps = threads / 32, warp = thread / 32, lane = thread % 32;
    if (destinations == 0) return push_share{1, 1, lane, 32};
    if (warps >= destinations) {
      const uint32_t per = warps / destinations;  // warps per destination; the last warps % G-1 stay idle
      return push_share{1 + warp / per, destinations, (warp % per) * 32 + lane, per * 32};
    }
    return push_share{1 + warp, warps, lane, 32};
  }
  // 5 + 6 + 10 + 11 bits (first <= 16, step <= 32, lane < 1024, lanes <= 1024): one register in the communicator.
  __device__ uint32_t pack() const { return first | step << 5 | lane << 11 | lanes << 21; }
  __device__ static push_share unpack(uint32_t bits) {
    return push_share{bits & 31u, (bits >> 5) & 63u, (bits >> 11) & 1023u, bits >> 21};
  }
};

class communicator {
 public:
  // Whole cluster, once, before any collective. `mailbox` points to mailbox_bytes(cluster size, slot_bytes,
  // layout) bytes of shared memory, 16-byte aligned, at the same offset in every block; slot_bytes is a
  // multiple of 16. A ring layout (see limits.cuh) serves only dsm_shuffle with one group size.
  // `how` picks the data path (limits.cuh, transport).
  __device__ static communicator setup(void* mailbox, uint32_t slot_bytes,
                                       mailbox_layout layout = mailbox_layout::all_peers,
                                       transport how = transport::direct) {
    communicator self;
    self.rank_ = ptx::block_rank();
    self.size_ = ptx::cluster_size();
    self.thread_ = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    self.threads_ = blockDim.x * blockDim.y * blockDim.z;
    self.full_ = static_cast<uint64_t*>(mailbox);
    self.empty_ = self.full_ + 2;
    self.direct_full_ = self.empty_ + 2 * max_cluster_size;
    self.ready_ = self.direct_full_ + 2;
    self.slots_ = reinterpret_cast<uint4*>(static_cast<char*>(mailbox) + mailbox_barrier_bytes);
    self.slot_packets_ = slot_bytes / packet_bytes;
    self.cluster_share_ = push_share::make(self.threads_, self.thread_, self.size_ - 1).pack();
    self.ring_ = layout == mailbox_layout::ring;
    self.bulk_ = how == transport::bulk_copy;
    self.direct_ = how == transport::direct;
    self.round_ = 0;
    self.direct_calls_ = 0;
    self.send_parity_ = 0xffffffffu;  // the first wait on each empty barrier passes (phase "-1" is complete)
    // Only the barriers this cluster size uses: full[2], empty[s][d] and ready[d] for d < C, direct_full[0]
    // (15 at C = 4 instead of the area's 52). One thread and one fence: initialising by 52 threads, each with
    // its own fence.mbarrier_init, measured 0.7 us slower per launch than one thread doing all 52 (v6).
    if (self.thread_ == 0) {
      ptx::barrier_init(&self.full_[0], 1);
      ptx::barrier_init(&self.full_[1], 1);
      for (uint32_t i = 0; i < self.size_; ++i) {
        ptx::barrier_init(&self.empty_[i], 1);
        ptx::barrier_init(&self.empty_[max_cluster_size + i], 1);
        ptx::barrier_init(&self.ready_[i], 1);
      }
      ptx::barrier_init(&self.direct_full_[0], 1);
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
  __device__ bool bulk_copy() const { return bulk_; }
  __device__ bool direct() const { return direct_; }

  // Thread 0 of the block (others return at once): a trace event (trace.cuh); nothing unless
  // SOLDER_CLUSTER_TRACE.
  __device__ void stamp([[maybe_unused]] trace::phase what) const {
#if SOLDER_CLUSTER_TRACE
    if (thread_ == 0) trace::record(trace_events_++, what, round_);
#endif
  }

  // This thread's part of a round's pushes to the other blocks of `group` (computed once at setup for the whole
  // cluster; a smaller group costs two divisions).
  __device__ push_share pushes(const group_view& group) const {
    if (group.size == size_) return push_share::unpack(cluster_share_);
    return push_share::make(threads_, thread_, group.size - 1);
  }

  // The group of `group_size` consecutive ranks containing this block (no division for the whole cluster).
  __device__ group_view group(uint32_t group_size) const {
    if (group_size == size_) return group_view{0, size_, rank_};
    return group_view{rank_ / group_size * group_size, group_size, rank_ % group_size};
  }

  // ---- round machinery (for collectives.cuh) -------------------------------------------------------------

  // The local slot that `source` writes in round (next + ahead).
  __device__ uint4* receive_slot(uint32_t ahead, uint32_t source) const {
    return slot_at((round_ + ahead) & 1u, index_of(source, rank_));
  }

  // Whole block. Waits until every other block of `group` has released the slot this block writes in it in
  // round (next + ahead): one waiting thread per destination, then a block barrier.
  __device__ void wait_for_slots(uint32_t ahead, const group_view& group) {
    if (thread_ + 1 < group.size) wait_empty(ahead, group.peer(thread_ + 1));
    for (uint32_t i = 1; i < group.size; ++i) flip(ahead, group.peer(i));
    __syncthreads();
    stamp(trace::phase::slots_free);
  }

  // Whole block: as above for a single destination.
  __device__ void wait_for_slot(uint32_t ahead, uint32_t destination) {
    if (thread_ == 0) wait_empty(ahead, destination);
    flip(ahead, destination);
    __syncthreads();
    stamp(trace::phase::slots_free);
  }

  // Whole block. Waits until every other block of `group` has released every slot this block wrote into it
  // (both stages), without consuming the waits: a later wait_for_slot(s) on the same slot passes at once.
  // After it, no bulk copy of this block still reads its sources. One waiting thread per destination.
  __device__ void wait_for_releases(const group_view& group) const {
    if (thread_ + 1 < group.size) {
      wait_empty(0, group.peer(thread_ + 1));
      wait_empty(1, group.peer(thread_ + 1));
    }
    __syncthreads();
  }

  // Any thread: the slot this block writes in `destination` in round (next + ahead), and the barrier there.
  __device__ remote_slot peer_slot(uint32_t ahead, uint32_t destination) const {
    uint32_t stage = (round_ + ahead) & 1u;
    return remote_slot{ptx::map_to_rank(slot_at(stage, index_of(rank_, destination)), destination),
                       ptx::map_to_rank(&full_[stage], destination)};
  }

  // Whole block. Expects `bytes` for the next round and returns once they have all landed.
  __device__ void wait_round(uint32_t bytes) {
    uint32_t stage = round_ & 1u;
    if (thread_ == 0) {
      ptx::arrive_expect_bytes(&full_[stage], bytes);
      ptx::wait_parity(&full_[stage], (round_ >> 1) & 1u);
    }
    stamp(trace::phase::data_landed);
    __syncthreads();
    stamp(trace::phase::data_visible);
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
    stamp(trace::phase::consumed);
    if (thread_ + 1 < group.size) release_to(group.peer(thread_ + 1));
    stamp(trace::phase::released);
    advance();
  }

  // Whole block: as above for a round whose only source was `source`.
  __device__ void release_round_to(uint32_t source) {
    __syncthreads();
    stamp(trace::phase::consumed);
    if (thread_ == 0) release_to(source);
    stamp(trace::phase::released);
    advance();
  }

  // ---- direct gather (transport::direct; for collectives.cuh) ---------------------------------------------

  // Whole block, after a block barrier that follows every earlier access of this block's destination tile:
  // tells every other block of `group` that it may write into that tile (one arriving thread per peer).
  __device__ void announce_ready(const group_view& group) const {
    if (thread_ + 1 < group.size) ptx::arrive_remote(ptx::map_to_rank(&ready_[rank_], group.peer(thread_ + 1)));
    stamp(trace::phase::ready_sent);
  }

  // Whole block: waits until every other block of `group` has announced this call's readiness (one waiting
  // thread per destination), then a block barrier.
  __device__ void wait_ready(const group_view& group) const {
    if (thread_ + 1 < group.size) ptx::wait_parity(&ready_[group.peer(thread_ + 1)], direct_calls_ & 1u);
    __syncthreads();
    stamp(trace::phase::slots_free);
  }

  // Any thread: `destination`'s direct_full barrier (the one the pushes into its tile complete).
  __device__ uint64_t* peer_direct_barrier(uint32_t destination) const {
    return ptx::map_to_rank(&direct_full_[0], destination);
  }

  // Whole block: expects `bytes` on this block's direct_full and returns once they have all landed; ends the
  // direct call.
  __device__ void wait_direct(uint32_t bytes) {
    if (thread_ == 0) {
      ptx::arrive_expect_bytes(&direct_full_[0], bytes);
      ptx::wait_parity(&direct_full_[0], direct_calls_ & 1u);
    }
    stamp(trace::phase::data_landed);
    __syncthreads();
    stamp(trace::phase::data_visible);
    ++direct_calls_;
  }

 private:
  __device__ uint32_t empty_bit(uint32_t ahead, uint32_t destination) const {
    return ((round_ + ahead) & 1u) * max_cluster_size + destination;
  }
  __device__ void wait_empty(uint32_t ahead, uint32_t destination) const {
    uint32_t bit = empty_bit(ahead, destination);
    ptx::wait_parity(&empty_[bit], (send_parity_ >> bit) & 1u);
  }
  __device__ void flip(uint32_t ahead, uint32_t destination) { send_parity_ ^= 1u << empty_bit(ahead, destination); }

  // Slot index at `receiver` of the data that `sender` writes (its distance, or 0 in a ring mailbox).
  __device__ uint32_t index_of(uint32_t sender, uint32_t receiver) const {
    if (ring_) return 0u;
    const uint32_t distance = sender + size_ - receiver - 1;  // below 2 * size_
    return distance >= size_ ? distance - size_ : distance;
  }
  __device__ uint4* slot_at(uint32_t stage, uint32_t index) const {
    return slots_ + (stage * (ring_ ? 1u : size_ - 1) + index) * slot_packets_;
  }

  uint64_t* full_;
  uint64_t* empty_;
  uint64_t* direct_full_;  // direct_full[2] (transport::direct)
  uint64_t* ready_;        // ready[16] (transport::direct)
  uint4* slots_;
  uint32_t rank_, size_, thread_, threads_, slot_packets_;
  uint32_t cluster_share_;  // push_share::pack() of this thread's pushes to the rest of the cluster
  bool ring_;             // mailbox_layout::ring: one slot per stage
  bool bulk_;             // transport::bulk_copy
  bool direct_;           // transport::direct
  uint32_t round_;        // next round to receive
  uint32_t direct_calls_; // direct gathers completed (their parity is the phase parity of direct_full and ready)
  uint32_t send_parity_;  // bit (stage * 16 + destination): parity to wait for on empty[stage][destination]
#if SOLDER_CLUSTER_TRACE
  mutable uint32_t trace_events_ = 0;  // events this block's thread 0 has recorded
#endif
};

}  // namespace solder::cluster
