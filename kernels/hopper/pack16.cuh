// Two floats rounded (to nearest even) to the 16-bit dtype, packed into one 32-bit word: `lo` in the low half, the
// layout wgmma A fragments, 16-bit stores and the 128B-swizzled shared-memory tiles use. One F2FP.PACK_AB in SASS.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fa3nn::hopper {

template <bool kBF16>
__device__ __forceinline__ uint32_t pack_16x2(float lo, float hi) {
  if constexpr (kBF16) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

}  // namespace fa3nn::hopper
