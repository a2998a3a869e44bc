// mbarrier: the shared-memory barrier that TMA completes (complete_tx) and that producer/consumer roles wait on.
// A phase completes when its pending arrivals reach 0 and its transaction bytes reach 0; waiters test a phase by its
// parity bit. See HOPPER_PRIMER.md section 5.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

__device__ __forceinline__ uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

struct MBarrier {
  uint64_t word;

  __device__ __forceinline__ void init(uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(this)), "r"(arrivals) : "memory");
  }

  __device__ __forceinline__ void arrive() {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(this)) : "memory");
  }

  // Declare the bytes the TMA copies of this phase will deliver, and arrive (in that order, so the phase cannot
  // complete before the bytes land).
  __device__ __forceinline__ void arrive_expect_tx(uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(this)), "r"(bytes)
                 : "memory");
  }

  __device__ __forceinline__ bool try_wait(uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(this)), "r"(parity)
        : "memory");
    return done != 0;
  }

  // Block until the phase with this parity has completed. With FA3NN_HANG_GUARD (the default build), a wait that
  // spins for ~2^30 polls (seconds) traps instead of hanging the GPU: a phase bug then fails loudly.
  __device__ __forceinline__ void wait(uint32_t parity) {
#ifdef FA3NN_HANG_GUARD
    uint32_t polls = 0;
    while (!try_wait(parity)) {
      if (++polls == (1u << 30)) __trap();
    }
#else
    while (!try_wait(parity)) {
    }
#endif
  }
};

// Make mbarrier.init visible to the async proxy (TMA) before any copy signals the barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

}  // namespace fa3nn::hopper
