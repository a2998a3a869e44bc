// Instantiations of the Hopper FP8 forward for head dim 128 (one translation unit per head dim: parallel builds).
#include "flash_fwd_fp8_launch.cuh"

namespace fa3nn::hopper::host {

int run_fp8_d128(const Fp8Problem& pr, int variant) { return run_fp8_headdim<128>(pr, variant); }

}  // namespace fa3nn::hopper::host
