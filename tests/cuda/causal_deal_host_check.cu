// The causal tile deals the launchers choose (kernels/hopper/flash_fwd_launch.cuh fill_fwd_params and
// use_one_pair_sections, for the bf16 and the FP8 forward), checked on the CPU: which (batch, head) pairs share a
// longest-first section and whether rounds are dealt boustrophedon, at the FA3 paper's d128 / d256 causal shapes.
// Built for the host with nvcc by tests/test_fast_div.py; prints one line per failure and "; N failures" last.
#include <cstdio>

#include "flash_fwd_fp8_launch.cuh"
#include "host_fail.h"

using namespace fa3nn::hopper;
using namespace fa3nn::hopper::host;

struct CausalTiles {  // fill_fwd_params reads these three of a kernel configuration
  static constexpr bool kCausal = true;
  static constexpr int kBlockM = 128, kBlockN = 128;
};
struct Fp8CausalTiles {  // the FP8 forward's d128 default beyond 256 keys: 128-row tiles, 256-key blocks
  static constexpr bool kCausal = true;
  static constexpr int kBlockM = 128, kBlockN = 256;
};

static int failures = 0;

static void expect(bool ok, const char* what, int headdim, int seqlen, int deal) {
  if (!ok) {
    ++failures;
    std::printf("FAIL %s: headdim %d, seqlen %d, causal_deal %d\n", what, headdim, seqlen, deal);
  }
}

int main() {
  const int64_t strides[12] = {};
  for (int headdim : {128, 256}) {
    for (int seqlen : {2048, 4096, 8192, 16384}) {
      Fp8Problem pr{};
      pr.strides = strides;
      pr.batch = 16384 / seqlen;
      pr.nheads = pr.nheads_kv = 2048 / headdim;
      pr.seqlen_q = pr.seqlen_k = pr.max_seqlen_q = pr.max_seqlen_k = seqlen;
      pr.headdim = headdim;
      const int pairs = pr.batch * pr.nheads;
      // The default deal (1): one pair per section up to 8192 rows at d128 and 4096 at d256, except the FP8 forward
      // (K/V of 1 byte) at d128, which takes it up to 4096 only; elsewhere one section over every tile, as deal 2
      // always does.
      const bool bf16_one_pair = seqlen <= (headdim == 128 ? 8192 : 4096);
      const bool fp8_one_pair = seqlen <= 4096;
      for (int kv_bytes : {2, 1}) {
        for (int d : {1, 2}) {
          pr.causal_deal = d;
          const FwdParams p = fill_fwd_params<CausalTiles>(pr, kv_bytes);
          const bool one_pair = d == 1 && (kv_bytes == 1 ? fp8_one_pair : bf16_one_pair);
          expect(p.heads_per_section == (one_pair ? 1 : pairs), kv_bytes == 1 ? "FP8 heads per section"
                                                                              : "bf16 heads per section",
                 headdim, seqlen, d);
          expect(p.boustrophedon == 1, "boustrophedon", headdim, seqlen, d);
        }
      }
    }
  }
  // Few (batch, head) pairs (fwd_deal_model.cuh, 132 SMs without a GPU), d128: one sequence of 8k x 8 / 16 / 24 heads
  // and of 4k x 16 take one section over every tile in the bf16 forward (the one-pair deal simulates 1.27-1.76 max /
  // mean there, one section 1.00-1.02); 2 x 8k x 16 (the paper's) and one 8k x 32 keep one pair per section. The FP8
  // forward (K/V of 1 byte, 256-key blocks) deals one section beyond 4k whatever the pairs, and within its one-pair
  // lengths by the same model: one 4k x 8 / 16 / 24 and one 2k x 16 one section (simulated 1.25-1.68 against
  // 1.01-1.03), one 2k x 32 and the paper's 4 x 4k x 16 / 8 x 2k x 16 one pair.
  struct FewPairs {
    int batch, seqlen, heads;
    bool bf16_one_section, fp8_one_section;
  };
  for (const FewPairs& c : {FewPairs{1, 8192, 8, true, true}, FewPairs{1, 8192, 16, true, true},
                            FewPairs{1, 8192, 24, true, true}, FewPairs{1, 4096, 16, true, true},
                            FewPairs{2, 8192, 16, false, true}, FewPairs{1, 8192, 32, false, true},
                            FewPairs{1, 4096, 8, true, true}, FewPairs{1, 4096, 24, true, true},
                            FewPairs{1, 2048, 16, true, true}, FewPairs{1, 2048, 32, false, false},
                            FewPairs{4, 4096, 16, false, false}, FewPairs{8, 2048, 16, false, false}}) {
    Fp8Problem pr{};
    pr.strides = strides;
    pr.batch = c.batch;
    pr.nheads = pr.nheads_kv = c.heads;
    pr.seqlen_q = pr.seqlen_k = pr.max_seqlen_q = pr.max_seqlen_k = c.seqlen;
    pr.headdim = 128;
    pr.causal_deal = 1;
    const int pairs = c.batch * c.heads;
    const FwdParams bf16 = fill_fwd_params<CausalTiles>(pr, 2), fp8 = fill_fwd_params<Fp8CausalTiles>(pr, 1);
    expect(bf16.heads_per_section == (c.bf16_one_section ? pairs : 1), "bf16 few-pair deal (last number: heads)",
           128, c.seqlen, c.heads);
    expect(fp8.heads_per_section == (c.fp8_one_section ? pairs : 1), "FP8 few-pair deal (last number: heads)", 128,
           c.seqlen, c.heads);
    expect(bf16.boustrophedon == 1 && fp8.boustrophedon == 1, "few-pair boustrophedon (last number: heads)", 128,
           c.seqlen, c.heads);
  }
  std::printf("causal deals checked; %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
