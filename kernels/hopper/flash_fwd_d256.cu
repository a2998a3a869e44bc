// Instantiations of the Hopper forward for head dim 256 (one translation unit per head dim: parallel builds).
#include "flash_fwd_launch.cuh"

namespace fa3nn::hopper::host {

int run_d256(const Problem& pr, bool bf16, bool causal, int variant) {
  return run_headdim<256>(pr, bf16, causal, variant);
}

}  // namespace fa3nn::hopper::host
