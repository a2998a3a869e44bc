// Backward instantiations for multi-head latent attention's head dims (q / k 192, v 128): variant 1 (bulk dQ, 64-key
// blocks, flash_bwd_mla.cuh) and variant 5 (mla_keys, 128-key blocks, flash_bwd_mla_keys.cuh), dense or varlen;
// bf16 / fp16, causal or not; no windows or softcap (as the 192 / 128 forward).
#include "flash_bwd_launch.cuh"

namespace fa3nn::hopper::host {

namespace {

// kKeySplit: variant 5 (mla_keys, flash_bwd_mla_keys.cuh, 128-key blocks; the default, Python's
// hopper_bwd.DEFAULT_VARIANTS); else variant 1 (bulk dQ, 64-key blocks).
template <bool kVarlen, bool kKeySplit = false>
int run_mla(const BwdProblem& pr, bool bf16, bool causal) {
  constexpr int S = BwdTiles<192, 64>::kStages;
  constexpr bool V = kVarlen, K = kKeySplit;
  if (bf16)
    return causal ? launch_bwd<BwdConfig<192, S, true, true, true, false, 64, V, false, false, 128, K>>(pr)
                  : launch_bwd<BwdConfig<192, S, true, false, true, false, 64, V, false, false, 128, K>>(pr);
  return causal ? launch_bwd<BwdConfig<192, S, false, true, true, false, 64, V, false, false, 128, K>>(pr)
                : launch_bwd<BwdConfig<192, S, false, false, true, false, 64, V, false, false, 128, K>>(pr);
}

}  // namespace

int run_bwd_d192_128(const BwdProblem& pr, bool bf16, bool causal, int variant) {
  if (pr.window.local || pr.softcap > 0.f)
    return fail("%s", "head dims 192 / 128 have no sliding-window or softcap backward");
  if (variant == 5)
    return pr.cu_seqlens_q != nullptr ? run_mla<true, true>(pr, bf16, causal) : run_mla<false, true>(pr, bf16, causal);
  if (variant != 1)
    return fail("%s", "head dims 192 / 128's backward is built as variants 1 (bulk dQ) and 5 (mla_keys) only");
  return pr.cu_seqlens_q != nullptr ? run_mla<true>(pr, bf16, causal) : run_mla<false>(pr, bf16, causal);
}

}  // namespace fa3nn::hopper::host

#ifdef FA3NN_BWD_TRACE
// The trace of this unit's kernels (flash_bwd_trace.cuh): out holds kBwdTraceCtas * kBwdTraceTiles * kTraceEvents.
#pragma GCC visibility push(default)
extern "C" int fa3nn_hopper_bwd_trace_d192(unsigned long long* out) { return fa3nn::hopper::read_bwd_trace(out); }
#pragma GCC visibility pop
#endif
