// Named (hardware) barriers: bar.sync waits, bar.arrive only counts. Ids 0..15; id 0 is __syncthreads, so fa3nn
// uses ids from kFirstId up. The thread count must be a multiple of 32 and the same for every participant.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

struct NamedBarrier {
  static constexpr uint32_t kFirstId = 8;

  __device__ __forceinline__ static void sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  }
  __device__ __forceinline__ static void arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
  }
};

}  // namespace fa3nn::hopper
