// TMA (cp.async.bulk.tensor): tile copies between global memory and shared memory described by a CUtensorMap that
// the host encodes and passes as a __grid_constant__ kernel parameter. Loads complete on an mbarrier (complete_tx);
// out-of-bounds box elements are zero-filled. One thread issues each copy.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "mbarrier.cuh"

namespace fa3nn::hopper {

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 4-d tile load: coordinates innermost first (element indices).
__device__ __forceinline__ void tma_load_4d(const CUtensorMap* map, MBarrier* bar, void* smem_dst, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 4-d tile store from shared memory (bulk-group completion): the caller commits and waits. Box elements outside the
// tensor are not written (TMA clips them), so the last tile of a sequence needs no row predicate.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* smem_src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until at most kPending bulk groups of this thread are pending, writes to global memory included (before the
// CTA exits, so no store outlives its shared-memory source).
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

// Generic-proxy writes to shared memory (st.shared) become visible to the async proxy (TMA store, wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One lane of the calling warp returns true (elect.sync), the others false.
__device__ __forceinline__ bool elect_one() {
  uint32_t elected;
  asm volatile(
      "{\n.reg .b32 lane;\n.reg .pred p;\n"
      "elect.sync lane|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(elected));
  return elected != 0;
}

}  // namespace fa3nn::hopper
