// Instantiations of the Hopper forward for DeepSeek's multi-head latent attention in its training form: Q and K of
// head dim 192 (128 + 64 rotary), V and O of 128 (FwdConfig::kHeadDimV).
//
// Tiles (shared memory: Q 128 x 192 = 48 KB a stage, K 128 x 192 = 48 KB and V 128 x 128 = 32 KB a stage):
//   variant 0: 128 x 128, 2 K/V stages, one Q stage (48 + 96 + 64 = 208 KB; FlashAttention-3's hdim 192 / dv 128
//              tile), O stored from registers; each row's max from integer maxes (S is 128 wide, as d128's tiles,
//              where they measured +3-9%; variants 10 / 11 compare).
//   variant 4: 128 x 96, Q double-buffered (96 + 72 + 48 = 216 KB), O through the Q stage with TMA stores.
// Registers per consumer thread: O 64 + S 64 (variant 4: 48) + P 32 (24), as d128's 128 x 128 tiles. Windows and
// softcap are not built here (fa3nn/backends/hopper.py refuses them; the Triton forward serves them).
#include "flash_fwd_launch.cuh"

namespace fa3nn::hopper::host {

namespace {

template <bool kBF16, bool kCausal, int kBlockN, int kQStages, bool kIntMax>
int launch_mla(const Problem& pr) {
  return launch<FwdConfig<192, kBlockN, 2, kBF16, kCausal, true, true, 2, false, kQStages, true, kIntMax, false,
                          false, 128>>(pr);
}

template <bool kBF16, int kBlockN, int kQStages, bool kIntMax>
int dispatch_mla(const Problem& pr, bool causal) {
  return causal ? launch_mla<kBF16, true, kBlockN, kQStages, kIntMax>(pr)
                : launch_mla<kBF16, false, kBlockN, kQStages, kIntMax>(pr);
}

}  // namespace

int run_d192_128(const Problem& pr, bool bf16, bool causal, int variant) {
  if (pr.window.local || pr.softcap > 0.f)
    return fail("%s", "head dims 192 / 128 are built without sliding windows and softcap");
  switch (variant) {
    case 0:
      return bf16 ? dispatch_mla<true, 128, 1, true>(pr, causal) : dispatch_mla<false, 128, 1, true>(pr, causal);
    case 4:
      if (!bf16) return fail("%s", "experimental tile variants exist for bf16 only");
      return dispatch_mla<true, 96, 2, true>(pr, causal);
    case 10:
    case 11:
      if (!bf16) return fail("%s", "the row max variants exist for bf16 only");
      return variant == 10 ? dispatch_mla<true, 128, 1, true>(pr, causal)
                           : dispatch_mla<true, 128, 1, false>(pr, causal);
    default:
      return fail("%s", "head dims 192 / 128 are built for variants full, tiles_a, int_max and float_max only");
  }
}

}  // namespace fa3nn::hopper::host
