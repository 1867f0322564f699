// Solder cluster collectives over distributed shared memory (DSM), for Hopper (sm_90a).
//
// SEMANTICS (the Kernel IR and the CPU executor implement exactly these; docs/cluster-collectives.md has the
// long form). C = cluster size (1..16, any value, powers of two or not), r = this block's rank in the cluster.
//
// * Every collective is called by ALL threads of EVERY block of the cluster, with the same arguments; tiles
//   are at the same offset in every block (symmetric allocation) or in per-block regions of global memory.
// * A tile is `count` contiguous elements of T in {float, __nv_bfloat16, __half}; count * sizeof(T) is a
//   multiple of 16 and tile pointers are 16-byte aligned. Tiles may live in the block's shared memory or in
//   global memory (payloads larger than shared memory); data always moves through the mailbox in chunks.
// * Reductions accumulate in fp32 in rank order (acc = x_0; acc = acc op x_1; ...; over the group's ranks
//   in increasing order) and round once to T (round to nearest even). The result is therefore bit-identical
//   in every block and reproducible from run to run.
//
//   cluster_reduce<op>(tile, n)        op in {sum, max, min}, in place: every block's tile[i] = op_r X_r[i].
//   cluster_gather(src, dst, n)        dst (C*n) = concatenation over r of src_r (n), in every block.
//   reduce_scatter<op>(src, dst, n)    src C*n -> dst n: block r's dst[i] = op_s src_s[r*n + i].
//   dsm_shuffle(src, dst, n, G)        groups of G consecutive ranks (G divides C); group rank g gets
//                                      dst = src of group rank (g-1+G) mod G. Split into dsm_shuffle_start /
//                                      dsm_shuffle_wait to overlap compute; callable in a loop (ring).
//   all_exchange<add|mul>(tile, n, G)  in place, every block of each group of G consecutive ranks ends with
//                                      the sum (add) or product (mul) over its group, accumulated as above.
//   inter_cluster_reduce<op>(tile, n, global)  op in {sum, max, min}: global[i] = global[i] op tile[i],
//                                      atomically, for every calling block; order across blocks and
//                                      clusters unspecified (16-bit T rounds at every combine).
//
// After a collective returns, its outputs are complete in the calling block and its inputs may be
// overwritten. Outputs must not overlap inputs except where a function says so.
//
// PROTOCOL: push style. Each block owns a mailbox (communicator::setup) with ping-pong receive slots; peers
// write into it with st.async (16-byte packets), completing the receiver's mbarrier transaction count;
// receivers hand slots back with remote mbarrier arrivals. Barriers are initialised once and published with one cluster barrier
// (entry); phases are tracked by parity so collectives never need a cluster-wide barrier; teardown() is the
// one cluster barrier before exit. See mailbox.cuh.
//
// Usage (every thread of every block):
//   extern __shared__ __align__(16) unsigned char smem[];
//   auto comm = solder::cluster::communicator::setup(smem, slot_bytes);   // mailbox_bytes(C, slot_bytes) bytes
//   (a mailbox_layout::ring mailbox, 2 slots instead of 2 (C-1), serves dsm_shuffle alone)
//   solder::cluster::cluster_reduce<solder::cluster::reduce_op::sum>(comm, tile, n);
//   ...
//   comm.teardown();
#pragma once

#include "collectives.cuh"
#include "gather_channel.cuh"
#include "inter_cluster.cuh"
#include "limits.cuh"
#include "mailbox.cuh"
#include "packet.cuh"
#include "ptx.cuh"
#include "reduce_channel.cuh"
