// A ring of shared-memory stages guarded by full/empty mbarrier pairs (the TMA producer/consumer pipeline).
//   full[s]:  1 arrival (the producer's arrive_expect_tx) + the stage's bytes from TMA.
//   empty[s]: one arrival per consumer warpgroup, after its wgmmas finished reading stage s.
// The producer starts waiting `empty` at parity 1 (a fresh barrier's previous phase counts as complete), consumers
// wait `full` at parity 0; both flip their parity each time the stage index wraps.
#pragma once
#include <cstdint>

#include "mbarrier.cuh"

namespace fa3nn::hopper {

template <int kStages>
struct PipelineState {
  uint32_t index = 0;
  uint32_t phase = 0;

  __device__ __forceinline__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1;
    }
  }
};

template <int kStages>
struct Pipeline {
  MBarrier full[kStages];
  MBarrier empty[kStages];

  __device__ __forceinline__ void init(uint32_t consumer_arrivals) {
    for (int s = 0; s < kStages; ++s) {
      full[s].init(1);
      empty[s].init(consumer_arrivals);
    }
  }

  // Producer side.
  __device__ __forceinline__ void producer_wait_empty(const PipelineState<kStages>& st) {
    empty[st.index].wait_sleeping(st.phase ^ 1);
  }
  __device__ __forceinline__ void producer_acquire(const PipelineState<kStages>& st, uint32_t bytes) {
    producer_wait_empty(st);
    full[st.index].arrive_expect_tx(bytes);
  }
  __device__ __forceinline__ MBarrier* full_barrier(const PipelineState<kStages>& st) { return &full[st.index]; }

  // Consumer side.
  __device__ __forceinline__ void consumer_wait(const PipelineState<kStages>& st) { full[st.index].wait(st.phase); }
  __device__ __forceinline__ void consumer_release(const PipelineState<kStages>& st) { empty[st.index].arrive(); }
};

}  // namespace fa3nn::hopper
