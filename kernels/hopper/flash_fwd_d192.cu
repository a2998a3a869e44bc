// Instantiations of the Hopper forward for DeepSeek's multi-head latent attention in its training form: Q and K of
// head dim 192 (128 + 64 rotary), V and O of 128 (FwdConfig::kHeadDimV).
//
// Tiles (shared memory: Q 128 x 192 = 48 KB a stage, K 128 x 192 = 48 KB and V 128 x 128 = 32 KB a stage):
//   long: 128 x 128, 2 K/V stages, one Q stage (48 + 96 + 64 = 208 KB; FlashAttention-3's hdim 192 / dv 128 tile),
//         O stored from registers.
//   short (variant 4 at every length): 128 x 96, Q double-buffered (96 + 72 + 48 = 216 KB), O through the Q stage
//         with TMA stores.
// Variant 0 takes the short tiles up to kShortCausal / kShortNonCausal query rows, each row's max from integer maxes
// (variant 5: the long tiles at every length; 11: the same with the float tree). H200, bench_hopper.py, same run
// (s38b-h200-20261205-1713), against cuDNN at seqlen 512 / 1k / 2k / 4k / 8k / 16k: 128 x 128 non-causal 1.02 /
// 1.07 / 1.10 / 1.17 / 1.19 / 1.17x, causal 0.84 / 0.87 / 0.95 / 1.18 / 1.32 / 1.37x; 128 x 96 non-causal 1.07 /
// 1.10 / 1.08 / 1.13 / 1.12 / 1.12x, causal 0.86 / 0.88 / 0.96 / 1.16 / 1.27 / 1.26x; the float tree 2-8% below the
// integer maxes from 1024 on.
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

constexpr int kShortCausal = 2048, kShortNonCausal = 1024;

template <bool kBF16>
int dispatch_default(const Problem& pr, bool causal) {
  if (pr.max_seqlen_q <= (causal ? kShortCausal : kShortNonCausal)) return dispatch_mla<kBF16, 96, 2, true>(pr, causal);
  return dispatch_mla<kBF16, 128, 1, true>(pr, causal);
}

}  // namespace

int run_d192_128(const Problem& pr, bool bf16, bool causal, int variant) {
  if (pr.window.local || pr.softcap > 0.f)
    return fail("%s", "head dims 192 / 128 are built without sliding windows and softcap");
  switch (variant) {
    case 0:
    case 10:  // (the default's row max)
      return bf16 ? dispatch_default<true>(pr, causal) : dispatch_default<false>(pr, causal);
    case 4:
      if (!bf16) return fail("%s", "experimental tile variants exist for bf16 only");
      return dispatch_mla<true, 96, 2, true>(pr, causal);
    case 5:
      if (!bf16) return fail("%s", "experimental tile variants exist for bf16 only");
      return dispatch_mla<true, 128, 1, true>(pr, causal);
    case 11:
      if (!bf16) return fail("%s", "the row max variants exist for bf16 only");
      return dispatch_mla<true, 128, 1, false>(pr, causal);
    default:
      return fail("%s", "head dims 192 / 128 are built for variants full, tiles_a, tiles_b, int_max and float_max");
  }
}

}  // namespace fa3nn::hopper::host
