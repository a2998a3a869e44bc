// TMA reduce-add: a shared-memory tile added element-wise into global memory through a CUtensorMap
// (cp.reduce.async.bulk.tensor, PTX ISA 8.0, sm_90). The backward's bulk dQ path uses it to add a CTA's fp32 dQ tile
// into dq_accum in one instruction per 64 x 32 panel instead of one red.global.add.v2.f32 per thread and pair.
//
// Semantics the callers rely on (PTX ISA, cp.reduce.async.bulk.tensor): the element type comes from the tensor map
// (f32 here); each element is reduced atomically with respect to other reductions, so CTAs adding into the same rows
// need no ordering; the source is read through the async proxy, so threads that wrote it with st.shared must run
// fence.proxy.async.shared::cta before the issuing thread is told to go (a named barrier); the source may be
// overwritten only after cp.async.bulk.wait_group.read, and the writes are complete after cp.async.bulk.wait_group
// (tma.cuh: tma_store_commit / tma_store_wait_read / tma_store_wait, shared with the TMA store). A 128B-swizzled map
// needs the source panel 1024-B aligned (the swizzle XORs address bits 4-6 with bits 7-9).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "tma.cuh"

namespace fa3nn::hopper {

// global[c0.., c1.., c2, c3] += smem tile (the map's box), bulk-group completion. One thread issues it.
__device__ __forceinline__ void tma_reduce_add_4d(const CUtensorMap* map, const void* smem_src, int c0, int c1,
                                                  int c2, int c3) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

}  // namespace fa3nn::hopper
