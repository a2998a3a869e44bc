// Global-memory primitives shared by the kernels: 16-byte loads / stores in PTX, and the quad transpose that turns a
// wgmma accumulator's 4-byte column pairs into 16-byte row segments.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

// One 16-byte global load / store (the pointer 16-B aligned): written in PTX because nvcc split a uint4 access
// through a cast 2-byte pointer into two 8-byte loads and four 4-byte stores.
__device__ __forceinline__ uint4 ld_global_16(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr));
  return v;
}
__device__ __forceinline__ void st_global_16(void* ptr, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// A 4 x 4 transpose of 32-bit words across the 4 lanes of a quad (lane q = lane % 4): lane q holds a[c] = M[q][c]
// and gets back M[r][q] in a[r]. Two butterfly stages (partner lane q ^ 2, then q ^ 1), each exchanging 2 words:
// 4 shuffles and selects per call. For an m64nN accumulator packed two 16-bit columns per word (word j of lane q =
// columns 8j + 2q, +1 of a row), words 4k .. 4k + 3 transposed give lane q the 16 contiguous bytes of columns
// 8 (4k + q) .. + 7.
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4]) {
  const int q = threadIdx.x % 4;
  const bool h = (q >> 1) & 1, l = q & 1;
  // Stage 1 (partner q ^ 2, the other row pair): keep the column pair c / 2 == h, send the other.
  {
    const uint32_t s0 = h ? a[0] : a[2], s1 = h ? a[1] : a[3];
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 2), r1 = __shfl_xor_sync(0xffffffffu, s1, 2);
    // Now M[row][col] for rows {l, l + 2} x cols {2h, 2h + 1}: own row q's words, the partner's (row q ^ 2) received.
    const uint32_t own0 = h ? a[2] : a[0], own1 = h ? a[3] : a[1];  // M[q][2h], M[q][2h + 1]
    // Rows ordered l (bit1 = 0) then l + 2: lane q's own row is l + 2h.
    a[0] = h ? r0 : own0;  // M[l][2h]
    a[1] = h ? r1 : own1;  // M[l][2h + 1]
    a[2] = h ? own0 : r0;  // M[l + 2][2h]
    a[3] = h ? own1 : r1;  // M[l + 2][2h + 1]
  }
  // Stage 2 (partner q ^ 1, the other column of the pair): keep column 2h + l, send column 2h + 1 - l.
  {
    const uint32_t s0 = l ? a[0] : a[1], s1 = l ? a[2] : a[3];  // M[l][2h + 1 - l], M[l + 2][2h + 1 - l]
    const uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
    // received: M[1 - l][2h + l], M[3 - l][2h + l]
    const uint32_t k0 = l ? a[1] : a[0], k1 = l ? a[3] : a[2];  // M[l][q], M[l + 2][q]
    a[0] = l ? r0 : k0;  // M[0][q]
    a[1] = l ? k0 : r0;  // M[1][q]
    a[2] = l ? r1 : k1;  // M[2][q]
    a[3] = l ? k1 : r1;  // M[3][q]
  }
}

}  // namespace fa3nn::hopper
