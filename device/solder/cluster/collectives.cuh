// The cluster collectives. Semantics: see cluster.cuh (top comment) and docs/cluster-collectives.md.
//
// Every function here is called by every thread of every block of the cluster with the same arguments
// (pointers at the same offsets), and contains block barriers at entry and exit. Tiles are passed as generic
// pointers: they may live in the block's shared memory or in global memory (one region per block). Remote
// writes only ever target the peers' mailbox slots; each block writes only its own tiles.
#pragma once

#include <cuda/std/bit>
#include <cuda/std/cstdint>

#include "limits.cuh"
#include "mailbox.cuh"
#include "packet.cuh"
#include "ptx.cuh"

namespace solder::cluster {

namespace detail {

__device__ inline uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__device__ inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// A ring mailbox has no slot per peer: only dsm_shuffle may use it.
__device__ inline void require_all_peers_layout(const communicator& comm) {
  if (comm.ring_layout()) __trap();
}

// One thread: one placeholder packet (ignored by the receiver) into a peer's slot, so that a round with an empty
// slice still completes the receiver's barrier (wire_packets, below). Not inlined: the rare path would otherwise
// cost the 16-bit all_exchange kernels 4 bytes of register spills.
__device__ __noinline__ inline void push_placeholder(uint4* target, uint64_t* barrier) {
  ptx::store_async_16(target, uint4{0, 0, 0, 0}, barrier);
}

// How one chunk of an all-reduce is split among the G owners: owner o reduces packets
// [begin(o), begin(o) + length(o)) of the tile, the first `extra` owners one packet more than the others.
// One division per chunk; begin and length are a multiply and a min. (v6: the earlier split,
// packets * o / G in 64-bit arithmetic, cost a 64-bit division per call of begin, about 15 per round on the
// critical path, and the trace showed a fixed ~2.5k cycles per round; NOTES-cluster.md.) Which owner reduces
// which packets does not change any result: every packet is combined in group-rank order by whoever owns it.
struct chunk_split {
  uint32_t first;  // first packet of the chunk in the tile
  uint32_t base;   // packets every owner gets
  uint32_t extra;  // owners 0 .. extra-1 get one more
  __device__ chunk_split(uint32_t chunk_first, uint32_t chunk_length, uint32_t owners)
      : first(chunk_first),
        base((owners & (owners - 1)) == 0 ? chunk_length >> cuda::std::countr_zero(owners) : chunk_length / owners),
        extra(chunk_length - base * owners) {}
  __device__ uint32_t begin(uint32_t owner) const { return first + base * owner + min_u32(owner, extra); }
  __device__ uint32_t length(uint32_t owner) const { return base + (owner < extra ? 1u : 0u); }
};

// The split of chunk `chunk` (chunks of `chunk_packets` packets of a `packets`-packet tile) among `owners`. Not
// inlined: inlined, its few registers pushed the 16-bit all-reduce kernels at 1024 threads (64 registers) into
// spilling (compile_check.sh -warn-spills).
__device__ __noinline__ inline chunk_split split_chunk(uint32_t chunk, uint32_t chunk_packets, uint32_t packets,
                                                       uint32_t owners) {
  const uint32_t first = chunk * chunk_packets;
  return chunk_split(first, min_u32(chunk_packets, packets - first), owners);
}

// Whole block: for p < packets, store(p, source[p]). Loads are issued in batches of four before the
// stores, so that tiles in global memory are read with four 16-byte loads in flight per thread (the compiler
// cannot reorder loads across stores through possibly aliasing generic pointers).
// strided_copy: the same for the packets lane, lane + lanes, ... of one thread (a push_share).
template <uint32_t batch = 4, class Store>  // 8 measured slower with st.async (NOTES-cluster.md, v4)
__device__ inline void strided_copy(const uint4* source, uint32_t packets, uint32_t lane, uint32_t stride,
                                    Store store) {
  for (uint32_t base = lane; base < packets; base += batch * stride) {
    uint4 value[batch];
#pragma unroll
    for (uint32_t j = 0; j < batch; ++j)
      if (base + j * stride < packets) value[j] = load_packet(source + base + j * stride);
#pragma unroll
    for (uint32_t j = 0; j < batch; ++j)
      if (base + j * stride < packets) store(base + j * stride, value[j]);
  }
}

template <class Store>
__device__ inline void batched_copy(const communicator& comm, const uint4* source, uint32_t packets, Store store) {
  strided_copy(source, packets, comm.thread(), comm.threads(), store);
}

// Whole block: for each destination i = 1 .. G-1 of `group`, st.asyncs the packets [0, length) of source into
// target, completing `barrier` (all three from route(i, &source, &target, &barrier), which returns length). An
// empty slice puts one placeholder packet on the wire (wire_packets). `typical` (the round's packets per
// destination) picks how the block shares the work (v6, measured on the H100 in bench/NOTES-cluster.md):
//   - up to 8 packets per lane when whole warps serve one destination each (push_share): spread, so that the
//     destinations are served in parallel (a 1 KB slice went out one destination after another, by the first
//     warps only; reduce 1 KB per block 2360 -> 1844 ns, gather 1 KB segments 1122 -> 802 ns);
//   - larger slices: every thread on every destination in turn (balanced when the warps do not divide evenly
//     among the destinations: a gather of 8 KB segments at 4 warps and 3 destinations was 1601 ns this way and
//     2030 ns spread).
// The limit (packets per lane when spread) was swept on the H100 in one call (bench_cf_config, 128 threads,
// in kernel; cluster-session5/spread-threshold/): 2 and 4 made the 2-8 KB all-reduces 25-30% slower, 16 made
// the 8 KB gather 25% slower; 8 was best or within noise everywhere.
#ifndef SOLDER_CLUSTER_SPREAD_PACKETS_PER_LANE
#define SOLDER_CLUSTER_SPREAD_PACKETS_PER_LANE 8
#endif
inline constexpr uint32_t spread_packets_per_lane = SOLDER_CLUSTER_SPREAD_PACKETS_PER_LANE;

template <class Route>
__device__ inline void push_to_peers(const communicator& comm, const group_view& group, uint32_t typical,
                                     Route route) {
  const push_share spread = comm.pushes(group);
  const bool spreading = typical <= spread_packets_per_lane * spread.lanes;
  const push_share share = spreading ? spread : push_share{1, 1, comm.thread(), comm.threads()};
  for (uint32_t i = share.first; i < group.size; i += share.step) {
    const uint4* source;
    uint4* target;
    uint64_t* barrier;
    const uint32_t length = route(i, source, target, barrier);
    if (length == 0) {
      if (share.lane == 0) ptx::store_async_16(target, uint4{0, 0, 0, 0}, barrier);
      continue;
    }
    strided_copy(source, length, share.lane, share.lanes,
                 [&](uint32_t p, uint4 value) { ptx::store_async_16(target + p, value, barrier); });
  }
}

// Whole block: destination[p] = source[p] for p < packets (generic pointers, no overlap).
__device__ inline void copy_packets(const communicator& comm, uint4* destination, const uint4* source,
                                    uint32_t packets) {
  batched_copy(comm, source, packets, [&](uint32_t p, uint4 value) { store_packet(destination + p, value); });
}

// Whether this call moves `tile` with bulk copies: the communicator asks for them and the tile is in this
// block's shared memory. Uniform across the block.
__device__ inline bool use_bulk(const communicator& comm, const void* tile) {
  return comm.bulk_copy() && ptx::is_shared(tile);
}

// Whole block, at a collective's entry (replaces its first block barrier): with bulk copies, every thread
// orders its earlier generic writes of shared memory before the copy engine's reads.
__device__ inline void enter(const communicator& comm, bool bulk) {
  if (bulk) ptx::fence_shared_to_async_proxy();
  __syncthreads();
  comm.stamp(trace::phase::call_begin);
}

// Whether this call writes the peers' `tile` directly (transport::direct, tile in shared memory). Uniform
// across the block and the cluster (tiles are at the same offset in every block).
__device__ inline bool use_direct(const communicator& comm, const void* tile) {
  return comm.direct() && ptx::is_shared(tile);
}

// Whole block: packets [source, source + packets) into a peer's slot (after wait_for_slot*). st.async by
// every thread, or with `bulk` one cp.async.bulk issued by thread `issuer` (the source must be in shared
// memory, written before a fence_shared_to_async_proxy + block barrier, and must stay unchanged until the
// receiver releases the slot).
__device__ inline void push_packets(const communicator& comm, remote_slot slot, const uint4* source,
                                    uint32_t packets, bool bulk = false, uint32_t issuer = 0) {
  if (bulk) {
    if (comm.thread() == issuer % comm.threads() && packets > 0)
      ptx::bulk_copy_to_peer(slot.data, source, packets * packet_bytes, slot.barrier);
    return;
  }
  batched_copy(comm, source, packets,
               [&](uint32_t p, uint4 value) { ptx::store_async_16(slot.data + p, value, slot.barrier); });
}

// The packets a round puts on the wire for a slice of `packets` packets. A slice may be empty (a chunk with
// fewer packets than group ranks: tiny tiles); its sender then pushes one placeholder packet (ignored by the
// receiver) instead of nothing, so that every receiver's round still waits for every sender. Without it, a
// receiver that needs nothing from a sender can hand the same slot back twice (its rounds of that stage
// complete on their own) before the sender waits for it once; the sender's parity wait then misses a phase
// and hangs (seen with three back-to-back 16-byte all-reduces over 3 blocks, 2026-11-22).
__device__ inline uint32_t wire_packets(uint32_t packets) { return packets == 0 ? 1u : packets; }

// Whole block: one placeholder packet into a peer's slot, st.async by thread `issuer`.
__device__ inline void push_placeholder(const communicator& comm, remote_slot slot, uint32_t issuer) {
  if (comm.thread() == issuer % comm.threads()) push_placeholder(slot.data, slot.barrier);
}

// Group all-reduce in place of a small tile in one round (v7): every block pushes its whole tile into a slot of
// every peer, then combines all G copies itself, in group-rank order in fp32 with one rounding: the same
// arithmetic as the two-round path's owner, so the same bits, in every block. Half the rounds (one wait, one
// release) for (G-1) x the tile on the wire instead of 2 (G-1)/G x; used when the tile fits one slot and
// each thread combines at most one_round_packets_per_thread packets (limits.cuh).
template <reduce_op Op, class T>
__device__ void one_round_all_reduce(communicator& comm, uint4* data, uint32_t packets, const group_view& group) {
  comm.wait_for_slots(0, group);
  push_to_peers(comm, group, packets, [&](uint32_t i, const uint4*& source, uint4*& target, uint64_t*& barrier) {
    const remote_slot slot = comm.peer_slot(0, group.peer(i));
    source = data;
    target = slot.data;
    barrier = slot.barrier;
    return packets;
  });
  comm.stamp(trace::phase::pushed);
  comm.wait_round((group.size - 1) * packets * packet_bytes);
  // Each packet is read and written by one thread only, so the tile is combined in place.
  for (uint32_t p = comm.thread(); p < packets; p += comm.threads()) {
    unpacked<T> accumulator;
    for (uint32_t r = 0; r < group.size; ++r) {
      const uint32_t source = group.rank_of(r);
      const uint4 value = source == comm.rank() ? load_packet(data + p) : comm.receive_slot(0, source)[p];
      if (r == 0) accumulator = unpack<T>(value);
      else combine_into<Op>(accumulator, unpack<T>(value));
    }
    store_packet(data + p, pack<T>(accumulator));
  }
  comm.release_round_to_group(group);
  comm.stamp(trace::phase::call_end);
}

// Group all-reduce in place: reduce-scatter then all-gather, chunked by the mailbox slot size, with the
// all-gather of chunk c and the reduce-scatter of chunk c+1 in flight together. 2 rounds per chunk of
// G * slot_packets packets. Accumulation in fp32 in group-rank order, one rounding to T.
// With bulk copies (shared-memory tiles): the reduce-scatter sources need no wait (a peer's all-gather data
// implies it has received my slice), the all-gather source (my reduced slice) is waited for at the end.
template <reduce_op Op, class T>
__device__ void group_all_reduce(communicator& comm, T* tile, uint32_t count, uint32_t group_size) {
  const bool bulk = use_bulk(comm, tile);
  // With transport::direct the all-gather half writes the reduced slices straight into the peers' tiles (no
  // copy-out). Safe without a handshake: peer p read its slice of mine (to push it to me) before I could reduce
  // it, and p reads or writes that slice again only after this call's last round; the slot protocol's waits and
  // releases are unchanged (the all-gather slots still carry the placeholders of empty slices).
  const bool direct = use_direct(comm, tile);
  enter(comm, bulk);
  const group_view group = comm.group(group_size);
  const uint32_t packets = count / elements_per_packet<T>;
  if (group.size == 1 || packets == 0) return;
  require_all_peers_layout(comm);
  uint4* data = reinterpret_cast<uint4*>(tile);
  if (!bulk && packets <= comm.slot_packets() && packets <= one_round_packets_per_thread * comm.threads()) {
    one_round_all_reduce<Op, T>(comm, data, packets, group);
    return;
  }
  const uint32_t chunk_packets = group.size * comm.slot_packets();
  const uint32_t chunks = packets <= chunk_packets ? 1u : ceil_div(packets, chunk_packets);

  // Packets of the tile that each group rank reduces in chunk `chunk`.
  auto split = [&](uint32_t chunk) { return split_chunk(chunk, chunk_packets, packets, group.size); };
  auto send_reduce_scatter = [&](uint32_t chunk, uint32_t ahead) {
    const chunk_split slices = split(chunk);
    comm.wait_for_slots(ahead, group);
    if (bulk) {
      for (uint32_t i = 1; i < group.size; ++i) {
        const uint32_t owner = group.wrap(group.local + i);
        remote_slot slot = comm.peer_slot(ahead, group.rank_of(owner));
        const uint32_t length = slices.length(owner);
        if (length == 0) push_placeholder(comm, slot, 32 * i);
        else push_packets(comm, slot, data + slices.begin(owner), length, true, 32 * i);
      }
    } else {
      push_to_peers(comm, group, slices.base + 1, [&](uint32_t i, const uint4*& source, uint4*& target,
                                                      uint64_t*& barrier) {
        const uint32_t owner = group.wrap(group.local + i);
        const remote_slot slot = comm.peer_slot(ahead, group.rank_of(owner));
        source = data + slices.begin(owner);
        target = slot.data;
        barrier = slot.barrier;
        return slices.length(owner);
      });
    }
    comm.stamp(trace::phase::pushed);
  };

  send_reduce_scatter(0, 0);
  for (uint32_t chunk = 0; chunk < chunks; ++chunk) {
    // Reduce-scatter round: combine my slice from every group rank, in rank order; st.async the result to
    // every peer (the all-gather round) straight from registers.
    const uint32_t mine = split(chunk).begin(group.local);
    const uint32_t mine_length = split(chunk).length(group.local);
    comm.wait_round((group.size - 1) * wire_packets(mine_length) * packet_bytes);
    comm.wait_for_slots(1, group);
    for (uint32_t p = comm.thread(); p < mine_length; p += comm.threads()) {
      unpacked<T> accumulator;
      for (uint32_t r = 0; r < group.size; ++r) {
        uint32_t source = group.rank_of(r);
        uint4 value = source == comm.rank() ? load_packet(data + mine + p) : comm.receive_slot(0, source)[p];
        if (r == 0) accumulator = unpack<T>(value);
        else combine_into<Op>(accumulator, unpack<T>(value));
      }
      uint4 result = pack<T>(accumulator);
      store_packet(data + mine + p, result);
      if (bulk) continue;
      for (uint32_t i = 1; i < group.size; ++i) {
        remote_slot slot = comm.peer_slot(1, group.peer(i));
        if (direct) slot.data = ptx::map_to_rank(data + mine, group.peer(i));  // the peer's tile, not its slot
        ptx::store_async_16(slot.data + p, result, slot.barrier);
      }
    }
    comm.stamp(trace::phase::pushed);
    if (mine_length == 0) {  // nothing reduced here in this chunk: a placeholder for every peer's all-gather
      for (uint32_t i = 1; i < group.size; ++i) push_placeholder(comm, comm.peer_slot(1, group.peer(i)), 32 * i);
    } else if (bulk) {  // the reduced slice goes out by the copy engine once the whole block has written it
      ptx::fence_shared_to_async_proxy();
      __syncthreads();
      for (uint32_t i = 1; i < group.size; ++i)
        push_packets(comm, comm.peer_slot(1, group.peer(i)), data + mine, mine_length, true, 32 * i);
    }
    comm.release_round_to_group(group);

    if (chunk + 1 < chunks) send_reduce_scatter(chunk + 1, 1);

    // All-gather round: every other group rank's reduced slice lands in its slot; copy into the tile.
    // Packets on the wire from the other owners: their slices, plus a placeholder for each empty one (a chunk
    // of n < G packets has G - n empty slices).
    const uint32_t chunk_length = min_u32(chunk_packets, packets - chunk * chunk_packets);
    const uint32_t empty = chunk_length < group.size ? group.size - chunk_length : 0;
    comm.wait_round((chunk_length - mine_length + empty - (mine_length == 0 ? 1 : 0)) * packet_bytes);
    for (uint32_t i = 1; i < group.size && !direct; ++i) {
      const chunk_split slices = split(chunk);
      const uint32_t owner = group.wrap(group.local + i);
      copy_packets(comm, data + slices.begin(owner), comm.receive_slot(0, group.rank_of(owner)), slices.length(owner));
    }
    comm.release_round_to_group(group);
  }
  if (bulk) comm.wait_for_releases(group);
  comm.stamp(trace::phase::call_end);
}

template <class T>
__device__ void shuffle_send_round(communicator& comm, const T* src, uint32_t count, uint32_t group_size,
                                   uint32_t round, uint32_t ahead) {
  const group_view group = comm.group(group_size);
  const uint32_t packets = count / elements_per_packet<T>;
  const uint32_t begin = round * comm.slot_packets();
  comm.wait_for_slot(ahead, group.successor());
  push_packets(comm, comm.peer_slot(ahead, group.successor()), reinterpret_cast<const uint4*>(src) + begin,
               min_u32(comm.slot_packets(), packets - begin));
}

}  // namespace detail

// ---- all-reduce -------------------------------------------------------------------------------------------

// cluster_reduce<op>(tile): in place, every block ends with op over all ranks, element-wise.
// op in {sum, max, min}. Whole cluster.
template <reduce_op Op, class T>
__device__ void cluster_reduce(communicator& comm, T* tile, uint32_t count) {
  static_assert(Op == reduce_op::sum || Op == reduce_op::max || Op == reduce_op::min,
                "cluster_reduce takes sum, max or min");
  detail::group_all_reduce<Op>(comm, tile, count, comm.size());
}

enum class exchange_op : uint32_t { add, mul };

// all_exchange<add|mul>(tile, group_size): in place, every block of each group of `group_size` consecutive
// ranks ends with the element-wise sum (add) or product (mul) over its group. Whole cluster.
template <exchange_op Op, class T>
__device__ void all_exchange(communicator& comm, T* tile, uint32_t count, uint32_t group_size) {
  constexpr reduce_op op = Op == exchange_op::add ? reduce_op::sum : reduce_op::prod;
  detail::group_all_reduce<op>(comm, tile, count, group_size);
}

// ---- all-gather -------------------------------------------------------------------------------------------

namespace detail {

// cluster_gather with transport::direct into a shared-memory dst: one round whatever the size. Entry
// handshake (mailbox.cuh, direct gather): my dst may be written once I announce it; I write a peer's dst once
// it has announced; then every thread st.asyncs src straight into dst + rank * count of every peer.
__device__ inline void direct_gather(communicator& comm, const uint4* source, uint4* destination, uint32_t packets,
                              const group_view& group) {
  comm.announce_ready(group);
  comm.wait_ready(group);
  push_to_peers(comm, group, packets, [&](uint32_t i, const uint4*& from, uint4*& target, uint64_t*& barrier) {
    const uint32_t peer = group.peer(i);
    from = source;
    target = ptx::map_to_rank(destination + comm.rank() * packets, peer);
    barrier = comm.peer_direct_barrier(peer);
    return packets;
  });
  comm.stamp(trace::phase::pushed);
  comm.wait_direct((group.size - 1) * packets * packet_bytes);
}

}  // namespace detail

// cluster_gather(src: count elements -> dst: size * count elements): dst[r * count + i] = src of rank r [i],
// in every block. src may be dst + rank * count (in place); otherwise src and dst must not overlap.
template <class T>
__device__ void cluster_gather(communicator& comm, const T* src, T* dst, uint32_t count) {
  const bool bulk = detail::use_bulk(comm, src);
  const bool direct = detail::use_direct(comm, dst);
  detail::enter(comm, bulk);
  const group_view group = comm.group(comm.size());
  const uint32_t packets = count / elements_per_packet<T>;
  const uint4* source = reinterpret_cast<const uint4*>(src);
  uint4* destination = reinterpret_cast<uint4*>(dst);
  if (src != dst + comm.rank() * count) detail::copy_packets(comm, destination + comm.rank() * packets, source, packets);
  if (group.size == 1 || packets == 0) {
    __syncthreads();
    return;
  }
  if (direct) {
    detail::direct_gather(comm, source, destination, packets, group);
    comm.stamp(trace::phase::call_end);
    return;
  }
  detail::require_all_peers_layout(comm);
  const uint32_t slot = comm.slot_packets();
  const uint32_t rounds = detail::ceil_div(packets, slot);
  auto send = [&](uint32_t round, uint32_t ahead) {
    uint32_t begin = round * slot;
    comm.wait_for_slots(ahead, group);
    const uint32_t length = detail::min_u32(slot, packets - begin);
    if (bulk) {
      for (uint32_t i = 1; i < group.size; ++i)
        detail::push_packets(comm, comm.peer_slot(ahead, group.peer(i)), source + begin, length, true, 32 * i);
    } else {
      detail::push_to_peers(comm, group, length, [&](uint32_t i, const uint4*& from, uint4*& target,
                                                     uint64_t*& barrier) {
        const remote_slot to = comm.peer_slot(ahead, group.peer(i));
        from = source + begin;
        target = to.data;
        barrier = to.barrier;
        return length;
      });
    }
    comm.stamp(trace::phase::pushed);
  };
  send(0, 0);
  for (uint32_t round = 0; round < rounds; ++round) {
    if (round + 1 < rounds) send(round + 1, 1);
    const uint32_t begin = round * slot;
    const uint32_t length = detail::min_u32(slot, packets - begin);
    comm.wait_round((group.size - 1) * length * packet_bytes);
    for (uint32_t i = 1; i < group.size; ++i) {
      uint32_t peer = group.peer(i);
      detail::copy_packets(comm, destination + peer * packets + begin, comm.receive_slot(0, peer), length);
    }
    comm.release_round_to_group(group);
  }
  if (bulk) comm.wait_for_releases(group);  // no bulk copy still reads src
  comm.stamp(trace::phase::call_end);
}

// ---- reduce-scatter ---------------------------------------------------------------------------------------

// reduce_scatter<op>(src: size * count elements -> dst: count elements): block r's dst[i] = op over ranks s
// (in rank order, fp32) of src_s[r * count + i]. dst may be src + rank * count; otherwise no overlap.
template <reduce_op Op, class T>
__device__ void reduce_scatter(communicator& comm, const T* src, T* dst, uint32_t count) {
  static_assert(Op == reduce_op::sum || Op == reduce_op::max || Op == reduce_op::min,
                "reduce_scatter takes sum, max or min");
  const bool bulk = detail::use_bulk(comm, src);
  detail::enter(comm, bulk);
  const group_view group = comm.group(comm.size());
  const uint32_t packets = count / elements_per_packet<T>;
  const uint4* source = reinterpret_cast<const uint4*>(src);
  uint4* destination = reinterpret_cast<uint4*>(dst);
  if (group.size == 1) {
    if (src != dst) detail::copy_packets(comm, destination, source, packets);
    __syncthreads();
    return;
  }
  if (packets == 0) return;
  detail::require_all_peers_layout(comm);
  const uint32_t slot = comm.slot_packets();
  const uint32_t rounds = detail::ceil_div(packets, slot);
  auto send = [&](uint32_t round, uint32_t ahead) {
    uint32_t begin = round * slot;
    comm.wait_for_slots(ahead, group);
    const uint32_t length = detail::min_u32(slot, packets - begin);
    if (bulk) {
      for (uint32_t i = 1; i < group.size; ++i) {
        const uint32_t peer = group.peer(i);
        detail::push_packets(comm, comm.peer_slot(ahead, peer), source + peer * packets + begin, length, true, 32 * i);
      }
    } else {
      detail::push_to_peers(comm, group, length, [&](uint32_t i, const uint4*& from, uint4*& target,
                                                     uint64_t*& barrier) {
        const uint32_t peer = group.peer(i);
        const remote_slot to = comm.peer_slot(ahead, peer);
        from = source + peer * packets + begin;
        target = to.data;
        barrier = to.barrier;
        return length;
      });
    }
  };
  send(0, 0);
  for (uint32_t round = 0; round < rounds; ++round) {
    if (round + 1 < rounds) send(round + 1, 1);
    const uint32_t begin = round * slot;
    const uint32_t length = detail::min_u32(slot, packets - begin);
    comm.wait_round((group.size - 1) * length * packet_bytes);
    for (uint32_t p = comm.thread(); p < length; p += comm.threads()) {
      unpacked<T> accumulator;
      for (uint32_t r = 0; r < group.size; ++r) {
        uint4 value = r == comm.rank() ? load_packet(source + r * packets + begin + p) : comm.receive_slot(0, r)[p];
        if (r == 0) accumulator = unpack<T>(value);
        else combine_into<Op>(accumulator, unpack<T>(value));
      }
      store_packet(destination + begin + p, pack<T>(accumulator));
    }
    comm.release_round_to_group(group);
  }
  if (bulk) comm.wait_for_releases(group);  // no bulk copy still reads src
}

// ---- ring shuffle -----------------------------------------------------------------------------------------

// dsm_shuffle_start / dsm_shuffle_wait (src -> dst, groups of `group_size` consecutive ranks): block of group
// rank g ends with dst = src of group rank (g - 1 + G) mod G. start pushes the first two slots' worth of src
// (all of it when count * sizeof(T) <= 2 * slot bytes) and returns, so compute can overlap the transfer;
// wait receives (and pushes any remaining chunks). Between the two, no other collective on `comm`, and src
// and dst are not written. dst may equal src (in place) or must not overlap it.
template <class T>
__device__ void dsm_shuffle_start(communicator& comm, const T* src, uint32_t count, uint32_t group_size) {
  __syncthreads();
  if (group_size == 1 || count == 0) return;
  const uint32_t rounds = detail::ceil_div(count / elements_per_packet<T>, comm.slot_packets());
  detail::shuffle_send_round(comm, src, count, group_size, 0, 0);
  if (rounds > 1) detail::shuffle_send_round(comm, src, count, group_size, 1, 1);
}

template <class T>
__device__ void dsm_shuffle_wait(communicator& comm, const T* src, T* dst, uint32_t count, uint32_t group_size) {
  const uint32_t packets = count / elements_per_packet<T>;
  if (group_size == 1) {
    __syncthreads();
    if (src != dst)
      detail::copy_packets(comm, reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), packets);
    __syncthreads();
    return;
  }
  if (packets == 0) return;
  const group_view group = comm.group(group_size);
  const uint32_t slot = comm.slot_packets();
  const uint32_t rounds = detail::ceil_div(packets, slot);
  for (uint32_t round = 0; round < rounds; ++round) {
    const uint32_t begin = round * slot;
    const uint32_t length = detail::min_u32(slot, packets - begin);
    comm.wait_round(length * packet_bytes);
    detail::copy_packets(comm, reinterpret_cast<uint4*>(dst) + begin, comm.receive_slot(0, group.predecessor()),
                         length);
    comm.release_round_to(group.predecessor());
    if (round + 2 < rounds) detail::shuffle_send_round(comm, src, count, group_size, round + 2, 1);
  }
}

template <class T>
__device__ void dsm_shuffle(communicator& comm, const T* src, T* dst, uint32_t count, uint32_t group_size) {
  dsm_shuffle_start(comm, src, count, group_size);
  dsm_shuffle_wait(comm, src, dst, count, group_size);
}

}  // namespace solder::cluster
