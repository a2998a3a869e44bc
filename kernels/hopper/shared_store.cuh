// Explicit shared-memory stores and loads. A pointer into the 1024-B-aligned dynamic shared memory that went through
// uintptr_t (every kernel's `smem`) is generic to the compiler, so plain C++ stores through it compile to ST.E
// (generic, 64-bit address, the shared window resolved per access: SASS of flash_bwd.cuh's write_ds); st.shared takes
// the 32-bit shared address and compiles to STS.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

// Two floats at shared address `addr` (8-B aligned).
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

// One 32-bit word at shared address `addr` (4-B aligned).
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

// A warpgroup's 64 rows of an m64nN fp32 accumulator (thread tid of 128 holds rows (tid / 32) * 16 + (tid % 32) / 4
// + 8 h, h = 0, 1; register 4 j + 2 h + e holds column 8 j + 2 (tid % 4) + e), each row h times scale[h], packed two
// columns per 32-bit word by pack(lo, hi), into shared memory at `base` as the layout 64-row TMA boxes of 2-byte
// elements read with the 128-B swizzle: 64-column panels `panel_bytes` apart, 128-B rows, 16-B chunk c of row r at
// c ^ (r % 8) (for each store the warp's rows XOR the chunk, so its 32 lanes hit 32 different banks). The bf16
// forward's TMA-store epilogue and the FP8 forward's both write O through it.
template <int kRegs, class Pack>
__device__ __forceinline__ void st_shared_rows_sw128(uint32_t base, uint32_t panel_bytes, int tid,
                                                     const float (&acc)[kRegs], const float (&scale)[2], Pack pack) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = (tid / 32) * 16 + (tid % 32) / 4 + 8 * half;
    const uint32_t row_addr = base + row * 128 + 4 * (tid % 4);
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {  // 8-column slab j: panel j / 8, chunk j % 8
      const int i = 4 * j + 2 * half;
      st_shared_b32(row_addr + (j / 8) * panel_bytes + (((j % 8) ^ (row % 8)) << 4),
                    pack(acc[i] * scale[half], acc[i + 1] * scale[half]));
    }
  }
}

// Two floats from shared address `addr` (8-B aligned), as LDS.64. Volatile with a memory clobber, so the compiler
// keeps each load where the code puts it: the backward's per-query row statistics, hoisted all at once as generic
// loads, held 64 registers at the m128 tile's peak and spilled (ptxas, nvcc 13.0).
__device__ __forceinline__ float2 ld_shared_v2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}

// One 32-bit word from shared address `addr` (4-B aligned), as LDS.
__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// A warpgroup's A fragments of m64nNk16 (kCols / 16 k-steps of 4 words: a[k][j] holds row (tid / 32) * 16 +
// (tid % 32) / 4 + 8 (j % 2), columns 16 k + 8 (j / 2) + 2 (tid % 4), +1) from 64 rows of 16-bit elements at `base`
// in the 128-B-swizzled layout st_shared_rows_sw128 writes (64-column panels `panel_bytes` apart, 16-B chunk c of
// row r at c ^ (r % 8)).
template <int kCols>
__device__ __forceinline__ void ld_shared_a_fragments_sw128(uint32_t (&a)[kCols / 16][4], uint32_t base,
                                                            uint32_t panel_bytes, int tid) {
#pragma unroll
  for (int k = 0; k < kCols / 16; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = (tid / 32) * 16 + (tid % 32) / 4 + 8 * (j % 2);
      const int slab = 2 * k + j / 2;  // 8-column slab: panel slab / 8, chunk slab % 8
      a[k][j] = ld_shared_b32(base + (slab / 8) * panel_bytes + row * 128 + (((slab % 8) ^ (row % 8)) << 4) +
                              4 * (tid % 4));
    }
}

}  // namespace fa3nn::hopper
