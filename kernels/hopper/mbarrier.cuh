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
  // try_wait_sleeping's suspend limit. A sleeping thread wakes when its phase completes (CUTLASS's pipelines pass
  // 10 ms and stay fast), so the value only sets how often a long wait polls and how long the hang guard takes.
  static constexpr uint32_t kSuspendHintNs = 10'000;
  // wait_sleeping's hang guard: polls before it traps. ~40 s of polls that sleep the whole hint; ~60 ms of polls
  // that come back at once (~25 cycles each, as un-hinted ones did), still far above any legitimate producer wait
  // (one consumer key block, microseconds).
  static constexpr uint32_t kSleepingPollLimit = 1u << 22;
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

  // Test the phase: true when it has completed. A thread whose phase has not completed may be suspended for a
  // short, system-dependent time before false comes back.
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

  // try_wait with a suspend-time hint: a thread whose phase has not completed sleeps until it does (or the hint runs
  // out) instead of coming back at once to poll again.
  __device__ __forceinline__ bool try_wait_sleeping(uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(this)), "r"(parity), "n"(kSuspendHintNs)
        : "memory");
    return done != 0;
  }

  // Block until the phase with this parity has completed, polling: the consumers' waits, whose data is almost
  // always there already (one poll per key block in the ncu profile). With FA3NN_HANG_GUARD (the default build), a
  // wait that spins for ~2^30 polls (seconds) traps instead of hanging the GPU: a phase bug then fails loudly.
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

  // Block until the phase has completed, sleeping between polls: the producer's waits for a free stage, which last
  // most of a consumer's key block. Measured (ncu, H200, 2026-11-30, `scripts/gpu_profile.sh`): polling there ran
  // about once per 25 cycles, 5.6-6.8% of all issued instructions of every forward and backward kernel, all on the
  // producer warp's scheduler, which one warp of each consumer warpgroup shares with it. The hang guard still counts
  // polls: a clock (%globaltimer) for it cost a register that made ptxas spill 4-20 bytes (nvcc 13.0).
  __device__ __forceinline__ void wait_sleeping(uint32_t parity) {
#ifdef FA3NN_HANG_GUARD
    uint32_t polls = 0;
    while (!try_wait_sleeping(parity)) {
      if (++polls == kSleepingPollLimit) __trap();
    }
#else
    while (!try_wait_sleeping(parity)) {
    }
#endif
  }
};

// Make mbarrier.init visible to the async proxy (TMA) before any copy signals the barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

}  // namespace fa3nn::hopper
