// Non-tensor bulk copies and vector reductions: cp.async.bulk (global -> shared, completes on an mbarrier like a TMA
// tile load) for small contiguous arrays such as a query block's lse and delta, and red.global.add.v2.f32 for
// accumulating fp32 partial sums (the backward's dQ) from many CTAs.
#pragma once
#include <cstdint>

#include "mbarrier.cuh"

namespace fa3nn::hopper {

// `bytes` from global `src` to shared `dst`, counted on `bar` (the caller's arrive_expect_tx includes them). Both
// addresses 16-B aligned, bytes a multiple of 16. One thread issues it.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, MBarrier* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// dst[0] += a, dst[1] += b as one relaxed device-scope reduction (sm_90; dst 8-B aligned). No value comes back, so
// it compiles to RED, not a round-tripping ATOM.
__device__ __forceinline__ void red_add_v2(float* dst, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(dst), "f"(a), "f"(b) : "memory");
}

}  // namespace fa3nn::hopper
