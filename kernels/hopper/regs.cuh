// Register reallocation between warpgroups (setmaxnreg, sm_90a). The producer gives registers back to the per-CTA
// pool, consumers take them. Needs a register cap at entry (__launch_bounds__(threads, 1)), else ptxas ignores it
// (C7508). Counts must be multiples of 8 in [24, 256]; every warp of the warpgroup must execute the same one.
#pragma once

namespace fa3nn::hopper {

template <int kRegs>
__device__ __forceinline__ void regs_release() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void regs_acquire() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg count");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace fa3nn::hopper
