// Instantiations of the Hopper FP8 forward for head dim 256 (one translation unit per head dim: parallel builds).
#include "flash_fwd_fp8_launch.cuh"

namespace fa3nn::hopper::host {

int run_fp8_d256(const Fp8Problem& pr, int variant) { return run_fp8_headdim<256>(pr, variant); }

}  // namespace fa3nn::hopper::host
