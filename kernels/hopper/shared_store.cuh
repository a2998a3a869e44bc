// Explicit shared-memory stores. A pointer into the 1024-B-aligned dynamic shared memory that went through uintptr_t
// (every kernel's `smem`) is generic to the compiler, so plain C++ stores through it compile to ST.E (generic, 64-bit
// address, the shared window resolved per access: SASS of flash_bwd.cuh's write_ds); st.shared takes the 32-bit
// shared address and compiles to STS.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

// Two floats at shared address `addr` (8-B aligned).
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

}  // namespace fa3nn::hopper
