// Thread-block clusters (sm_90): a CTA's rank, the shared-memory address of the same object in another CTA of the
// cluster (mapa), arrivals on another CTA's mbarrier, stores into another CTA's shared memory that complete on its
// mbarrier (st.async), and the cluster-wide barrier. The backward's 2-CTA cluster (flash_bwd_mla.cuh) is built on
// them. Addresses are 32-bit shared::cluster addresses; a CTA's own shared::cta address is a valid one for itself.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

// This CTA's rank in its cluster (0 .. cluster size - 1). Volatile: read where it is used, not held in a register
// across a loop (the producer's 24 registers).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// The address in CTA `rank`'s shared memory of the object at `addr` in this CTA's.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}

// One arrival on the mbarrier at `remote_bar` (a cluster_map address). The default semantics (release at CTA scope,
// CUTLASS's ClusterBarrier::arrive): what it announces is reads that have completed (wgmma reads waited for, shared
// loads whose values were used), not stores for the partner to see; .release.cluster costs a MEMBAR.ALL.GPU per
// arrival (SASS, nvcc 13.0).
__device__ __forceinline__ void cluster_arrive(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

// Two floats into another CTA's shared memory (remote_addr, 8-B aligned), their 8 bytes counted on the mbarrier at
// remote_bar in that CTA (its phase's expect_tx includes them): the receiver reads them after its wait, no fence.
__device__ __forceinline__ void st_async_v2(uint32_t remote_addr, float a, float b, uint32_t remote_bar) {
  asm volatile("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
                   remote_addr),
               "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(remote_bar)
               : "memory");
}

// `bytes` (a multiple of 16) from this CTA's shared memory at `src` into another CTA's at remote_dst (a cluster_map
// address, 16-B aligned), counted on the mbarrier at remote_bar in that CTA: one DMA instead of a store per value.
// Its source may be overwritten once the receiver has seen the bytes (completion is only signaled there).
__device__ __forceinline__ void bulk_copy_to_cluster(uint32_t remote_dst, uint32_t src, uint32_t bytes,
                                                     uint32_t remote_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   remote_dst),
               "r"(src), "r"(bytes), "r"(remote_bar)
               : "memory");
}

// Every thread of every CTA of the cluster: after it, each CTA's shared memory (its barriers initialized before the
// call) may be used by the others, or (at the end) none is used any more. .aligned: the whole warp executes it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

}  // namespace fa3nn::hopper
