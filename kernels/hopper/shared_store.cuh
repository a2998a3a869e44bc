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

// Two floats from shared address `addr` (8-B aligned), as LDS.64. Volatile with a memory clobber, so the compiler
// keeps each load where the code puts it: the backward's per-query row statistics, hoisted all at once as generic
// loads, held 64 registers at the m128 tile's peak and spilled (ptxas, nvcc 13.0).
__device__ __forceinline__ float2 ld_shared_v2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}

}  // namespace fa3nn::hopper
