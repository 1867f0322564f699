// Small named wrappers, one per PTX instruction family the cluster collectives use.
//
// Where CCCL's <cuda/ptx> wraps the instruction we call it; mapa and the cluster special registers come from
// the CUDA cluster intrinsics (__cluster_map_shared_rank & co.), which are not in <cuda/ptx>. Each comment
// says which threads must call the wrapper:
//   one thread      exactly one thread of the block (per barrier / per message)
//   any thread      any subset of threads, each call independent
//   whole block     every thread of the block, convergent
//   whole cluster   every thread of every block of the cluster
#pragma once

#include <cuda/ptx>
#include <cuda/std/cstdint>

namespace solder::cluster::ptx {

using cuda::std::uint32_t;
using cuda::std::uint64_t;

// ---- cluster geometry (any thread) -------------------------------------------------------------------------

// %cluster_ctarank: this block's rank in its cluster, 0 .. cluster_size() - 1.
__device__ inline uint32_t block_rank() { return __clusterRelativeBlockRank(); }

// %cluster_nctarank: number of blocks in this cluster (1 for a launch without clusters).
__device__ inline uint32_t cluster_size() { return __clusterSizeInBlocks(); }

// mapa: the generic address of the same shared-memory offset in block `rank` of this cluster. Any thread.
template <class T>
__device__ inline T* map_to_rank(T* local, uint32_t rank) {
  return static_cast<T*>(__cluster_map_shared_rank(static_cast<void*>(local), rank));
}

// isspacep.shared: whether a generic pointer points into this block's shared memory. Any thread.
__device__ inline bool is_shared(const void* pointer) { return __isShared(pointer) != 0; }

// ---- barrier.cluster (whole cluster) -----------------------------------------------------------------------

// barrier.cluster.arrive.release + barrier.cluster.wait.acquire. Whole cluster. Used only at setup and
// teardown; collectives never call it.
__device__ inline void cluster_sync() {
  cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_release);
  cuda::ptx::barrier_cluster_wait(cuda::ptx::sem_acquire);
}

// ---- mbarrier ----------------------------------------------------------------------------------------------

// mbarrier.init. One thread, before the barrier is published with fence_barrier_init + cluster_sync.
__device__ inline void barrier_init(uint64_t* barrier, uint32_t arrivals) {
  cuda::ptx::mbarrier_init(barrier, arrivals);
}

// fence.mbarrier_init.release.cluster: makes this thread's barrier_init calls visible to the cluster.
// One thread (the one that initialised), followed by cluster_sync.
__device__ inline void fence_barrier_init() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// Memory-model scope of the protocol's barrier operations. By default (v4) they use the semantics CUTLASS's
// cluster pipelines use: arrive = release at CTA scope, wait = acquire at CTA scope; the data itself is ordered
// by the transaction mechanism (st.async / cp.async.bulk complete_tx), and a slot release only has to order
// the receiver's reads of its own shared memory. -DSOLDER_CLUSTER_SCOPE_FENCES=1 restores the v1-v3
// cluster-scope release/acquire (measured ~2.5x slower per round: bench/NOTES-cluster.md, v4).
#ifndef SOLDER_CLUSTER_SCOPE_FENCES
#define SOLDER_CLUSTER_SCOPE_FENCES 0
#endif

// mbarrier.arrive.expect_tx on a barrier of this block: one arrival plus `bytes` of expected transactions.
// One thread per arrival the barrier was initialised with.
__device__ inline void arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
#if SOLDER_CLUSTER_SCOPE_FENCES
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster,
                                             cuda::ptx::space_shared, barrier, bytes);
#else
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, barrier, bytes);
#endif
}

// mbarrier.try_wait.parity, looped: returns once the phase with parity `parity` has completed (acquire at CTA
// scope; at cluster scope with SOLDER_CLUSTER_SCOPE_FENCES). Any thread (every thread that will read what the
// barrier guards must wait itself, or be ordered after the waiter by a block barrier).
__device__ inline void wait_parity(uint64_t* barrier, uint32_t parity) {
#if SOLDER_CLUSTER_SCOPE_FENCES
  while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, barrier, parity)) {
  }
#else
  while (!cuda::ptx::mbarrier_try_wait_parity(barrier, parity)) {
  }
#endif
}

// mbarrier.arrive.shared::cluster on a barrier in a peer block (address from map_to_rank), default semantics
// (release, CTA scope: as CUTLASS's ClusterBarrier::arrive(cta_id); not wrapped by <cuda/ptx>, hence the raw
// PTX). One thread per arrival; orders the block's earlier reads (after a block barrier) before it. With
// SOLDER_CLUSTER_SCOPE_FENCES: mbarrier.arrive.release.cluster.
__device__ inline void arrive_remote(uint64_t* remote_barrier) {
#if SOLDER_CLUSTER_SCOPE_FENCES
  cuda::ptx::mbarrier_arrive(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_cluster,
                             remote_barrier);
#else
  // The shared-window offset of a mapa address is its shared::cluster address (what <cuda/ptx> passes too).
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(remote_barrier));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(address) : "memory");
#endif
}

// mbarrier.try_wait.parity (default semantics: acquire at CTA scope), looped. For barriers whose phase is
// completed by transactions (st.async complete_tx has release semantics at cluster scope), as CUTLASS waits
// for TMA data. Any thread.
__device__ inline void wait_parity_cta(uint64_t* barrier, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(barrier, parity)) {
  }
}

// mbarrier.arrive.relaxed.cluster.shared::cluster on a peer's barrier: no ordering. Any thread; used only to
// measure latency.
__device__ inline void arrive_remote_relaxed(uint64_t* remote_barrier) {
  cuda::ptx::mbarrier_arrive(cuda::ptx::sem_relaxed, cuda::ptx::scope_cluster, cuda::ptx::space_cluster,
                             remote_barrier);
}

// ---- st.async (any thread) ---------------------------------------------------------------------------------

// st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.b32: store 16 bytes into a peer block's
// shared memory and complete 16 bytes of transactions on the peer's barrier. Any thread; the value is read
// from registers at issue, so the source may be overwritten as soon as the call returns.
__device__ inline void store_async_16(uint4* remote_destination, uint4 value, uint64_t* remote_barrier) {
  const uint32_t words[4] = {value.x, value.y, value.z, value.w};
  cuda::ptx::st_async(reinterpret_cast<uint32_t*>(remote_destination), words, remote_barrier);
}

// ---- bulk copies into peers (one thread) -------------------------------------------------------------------

// cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes: the copy engine moves `bytes` from
// this block's shared memory into a peer's (addresses from map_to_rank) and completes them on the peer's
// barrier. One thread; 16-byte aligned, bytes a multiple of 16. The source is read asynchronously: it may be
// changed only once the receiver has signalled that the data arrived. (Measured in bench/cluster; the
// collectives use store_async_16.)
__device__ inline void bulk_copy_to_peer(void* remote_destination, const void* local_source, uint32_t bytes,
                                         uint64_t* remote_barrier) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_shared, remote_destination, local_source,
                           bytes, remote_barrier);
}

// ---- this block's shared memory by 32-bit address (any thread) ----------------------------------------------

// cvta.to.shared: the 32-bit shared-window address of a generic pointer into this block's shared memory.
__device__ inline uint32_t shared_address(const void* local) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(local));
}

// ld.shared.v4.b32: one 16-byte packet of this block's shared memory. Any thread. (A generic load of a pointer the
// compiler cannot prove to be shared is an LD through the generic path; this is an LDS.) Volatile, with a memory
// clobber: never moved across the barrier waits around it.
__device__ inline uint4 load_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address)
               : "memory");
  return v;
}

// st.shared.v4.b32: one 16-byte packet into this block's shared memory. Any thread.
__device__ inline void store_shared_16(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// ---- max.NaN / min.NaN (any thread) --------------------------------------------------------------------------

// max.NaN.f32: NaN if either operand is NaN (the canonical NaN 0x7fffffff), else the larger, with +0 > -0, so
// the result does not depend on the operands' order. The same instruction as solder::max_nan
// (device/solder/runtime.cuh), which generated code uses; the CPU executor implements the same rule. Any thread.
__device__ inline float max_nan(float a, float b) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// min.NaN.f32: NaN if either operand is NaN, else the smaller, with -0 < +0. Any thread.
__device__ inline float min_nan(float a, float b) {
  float result;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// ---- proxies and bulk reductions to global memory ----------------------------------------------------------

// fence.proxy.async.shared::cta: orders this thread's generic writes to shared memory before later
// async-proxy (bulk copy) reads of it. Every thread that wrote the data, before the block barrier that
// precedes the bulk operation.
__device__ inline void fence_shared_to_async_proxy() {
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
}

// cp.reduce.async.bulk.global.shared::cta.bulk_group.<op>.<type>: global[i] = global[i] op shared[i] for
// `bytes` bytes, atomically per element. One thread; both addresses 16-byte aligned, bytes a multiple of 16.
template <class Op, class T>
__device__ inline void bulk_reduce_to_global(Op op, T* global_destination, const T* shared_source, uint32_t bytes) {
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, op, global_destination,
                                  shared_source, bytes);
}

// cp.async.bulk.commit_group + cp.async.bulk.wait_group 0: waits until this thread's bulk operations have
// completed (their writes performed). The one thread that issued them.
__device__ inline void bulk_commit_and_wait_all() {
  cuda::ptx::cp_async_bulk_commit_group();
  cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});
}

}  // namespace solder::cluster::ptx
