// Backward instantiations for head dim 256 (bf16/fp16 x causal/not x variant), compiled in parallel with the other units.
#include "flash_bwd_launch.cuh"

namespace fa3nn::hopper::host {

int run_bwd_d256(const BwdProblem& pr, bool bf16, bool causal, int variant) {
  return run_bwd_headdim<256>(pr, bf16, causal, variant);
}

}  // namespace fa3nn::hopper::host

#ifdef FA3NN_BWD_TRACE
// The trace of this unit's kernels (flash_bwd_trace.cuh): out holds kBwdTraceCtas * kBwdTraceTiles * kTraceEvents.
#pragma GCC visibility push(default)
extern "C" int fa3nn_hopper_bwd_trace_d256(unsigned long long* out) { return fa3nn::hopper::read_bwd_trace(out); }
#pragma GCC visibility pop
#endif
