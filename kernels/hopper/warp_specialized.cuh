// The entry of the warp-specialized forward kernels (bf16 and FP8), written once; the backward uses
// aligned_dynamic_smem and init_barriers and writes the role split out (flash_bwd_kernel says why):
//   thread 0 initializes the CTA's mbarriers and fences them for the async proxy (TMA), then the CTA syncs;
//   warpgroup 0, the producer, gives registers back (setmaxnreg.dec) and runs producer() (its warps pick their jobs);
//   warpgroups 1.., the consumers, take them (setmaxnreg.inc) and run consumer(c), c = 0.. from the first consumer.
#pragma once
#include <cstdint>

#include "mbarrier.cuh"
#include "regs.cuh"

namespace fa3nn::hopper {

// Dynamic shared memory from a 1024-B aligned base: a 128B-swizzled TMA tile (and the wgmma descriptor that reads
// it) must start on a 1024-B boundary. Each Cfg::kSmemBytes adds 1 KB of slack for the round-up.
__device__ __forceinline__ uint8_t* aligned_dynamic_smem() {
  extern __shared__ uint8_t smem_raw[];
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
}

// Thread 0 initializes the CTA's barriers (Cfg::Barriers::init(Cfg::kConsumers)) and fences them for the async
// proxy; on return every thread sees them initialized.
template <class Cfg>
__device__ __forceinline__ void init_barriers(typename Cfg::Barriers& bars) {
  if (threadIdx.x == 0) {
    bars.init(Cfg::kConsumers);
    fence_barrier_init();
  }
  __syncthreads();
}

// Cfg gives the barriers' type and consumer count (Cfg::Barriers::init(Cfg::kConsumers)) and the register split
// (kProducerRegs, kConsumerRegs); the kernel must be __launch_bounds__(threads, 1) for setmaxnreg to take effect
// (regs.cuh). The roles are lambdas, inlined, so the kernels' SASS is byte-identical to the hand-written entries this
// replaced (scripts/sass_identical.sh). Two forms that were not: the barrier init passed as a third lambda (the bf16
// forward's ablation kernels, no pingpong or no overlap, got other producer registers: 96-450 SASS lines apart), and
// a role returned to the kernel (`if (role < 0) producer else consumer`), which made ptxas ignore setmaxnreg (C7507):
// the release/acquire must stay inside the branch that runs the role. The producer gets no warp index: the backward's
// `warp == 0` / `warp == 1` on a shared threadIdx.x / 32 compiled to a shift and compare where its own
// `threadIdx.x / 32 == 0` is one masked test (90 SASS lines apart), so each producer reads threadIdx.x itself.
template <class Cfg, class Producer, class Consumer>
__device__ __forceinline__ void warp_specialize(typename Cfg::Barriers& bars, Producer&& producer,
                                                Consumer&& consumer) {
  const int warpgroup = threadIdx.x / 128;
  init_barriers<Cfg>(bars);

  if (warpgroup == 0) {
    regs_release<Cfg::kProducerRegs>();
    producer();
  } else {
    regs_acquire<Cfg::kConsumerRegs>();
    consumer(warpgroup - 1);
  }
}

}  // namespace fa3nn::hopper
