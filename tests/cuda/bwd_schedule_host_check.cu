// The backward's auto schedule (kernels/hopper/flash_bwd_launch.cuh use_persistent_bwd: one CTA per SM chaining
// tiles, or one CTA per tile), checked on the CPU at written-out shapes, so a change of the rule is a change of this
// table too. Built for the host with nvcc by tests/test_fast_div.py; prints one line per failure and "; N failures".
#include <cstdio>

#include "flash_bwd_launch.cuh"
#include "host_fail.h"

struct Case {
  int headdim;
  bool causal;
  int group, seqlen_q;
  bool skips_empty_tiles, panel_split, persistent;
};

// clang-format off
constexpr Case kCases[] = {
    // d64 (and the rule's default): non-causal up to 1024 query rows per tile, causal up to 4096; GQA counts the group.
    {64, false, 1, 512, false, false, true},    {64, false, 1, 1024, false, false, true},
    {64, false, 1, 2048, false, false, false},  {64, true, 1, 4096, false, false, true},
    {64, true, 1, 8192, false, false, false},   {64, true, 2, 2048, false, false, true},
    {64, true, 4, 2048, false, false, false},
    // d128: causal tiles of 2048-8192 rows only.
    {128, true, 1, 1024, false, false, false},  {128, true, 1, 2048, false, false, true},
    {128, true, 1, 8192, false, false, true},   {128, true, 1, 16384, false, false, false},
    {128, false, 1, 512, false, false, false},  {128, true, 4, 2048, false, false, true},
    // d256: never (s44b).
    {256, false, 1, 512, false, false, false},  {256, true, 1, 512, false, false, false},
    {256, true, 1, 4096, false, false, false},
    // varlen / windows (tiles that may be empty) and MLA's panel split: never.
    {64, false, 1, 512, true, false, false},    {128, true, 1, 2048, true, false, false},
    {192, true, 1, 2048, false, true, false},
};
// clang-format on

// auto_persistent_bwd: the launch's ctas (0 auto, -2 auto for varlen of one length, -1 one per tile, n > 0) with the
// kernel's varlen / window flags.
struct AutoCase {
  int ctas, headdim;
  bool causal, varlen, local;
  int seqlen_q;
  bool persistent;
};

// clang-format off
constexpr AutoCase kAutoCases[] = {
    {0, 128, true, false, false, 2048, true},    {-1, 128, true, false, false, 2048, false},
    {3, 128, true, false, false, 2048, false},   // an explicit count is not auto's form
    {0, 128, true, true, false, 2048, false},    {-2, 128, true, true, false, 2048, true},   // varlen: one length
    {-2, 128, false, true, false, 2048, false},  {-2, 128, true, true, false, 512, false},   // the dense rule's
    {-2, 64, false, true, false, 512, true},     {-2, 64, true, true, false, 8192, false},
    {-2, 256, true, true, false, 2048, false},   {-2, 128, true, true, true, 2048, false},   // windows: never
    {0, 64, true, false, true, 512, false},
};
// clang-format on

// tile_order (auto_key_blocks_outer for grid_order 0): grid_order, causal, varlen, the real GQA group, whether auto
// runs persistent, whether one CTA runs each tile, (K/V head, batch) pairs, key blocks per pair -> BwdTileOrder (0 key
// blocks innermost, 1 outermost, 2 outermost per batch).
struct OrderCase {
  int grid_order;
  bool causal, varlen;
  int group;
  bool auto_persistent, per_tile;
  long long pairs;
  int n_blocks, order;
  int headdim = 128;  // 64: outer_pairs_max's own bounds (persistent 48, one CTA per tile 28 at <= 64 key blocks)
};

// clang-format off
constexpr OrderCase kOrderCases[] = {
    {0, true, false, 1, true, false, 8, 64, 1},    {0, true, false, 1, true, false, 16, 128, 1},  // MHA persistent,
    {0, true, false, 1, true, false, 32, 64, 0},                                                  // few pairs / many
    {0, true, false, 1, false, true, 16, 64, 1},   {0, true, false, 1, false, true, 8, 96, 1},    // MHA per tile: few
    {0, true, false, 1, false, true, 8, 97, 0},    {0, true, false, 1, false, true, 17, 64, 0},   // pairs <= 96 blocks
    {0, true, false, 1, false, false, 8, 64, 0},                                                  // the caller's ctas
    {0, false, false, 1, true, false, 8, 64, 0},   {0, false, false, 1, false, true, 8, 64, 0},   // non-causal
    {0, true, true, 1, true, false, 8, 64, 0},     {0, true, true, 1, false, true, 8, 64, 0},     // varlen
    {0, true, false, 4, false, true, 512, 32, 2},  {0, true, false, 8, false, true, 8, 128, 2},   // GQA causal dense
    {0, true, false, 4, true, false, 512, 32, 1},  {0, true, false, 4, false, false, 64, 32, 1},  // GQA persistent
    {0, true, true, 4, false, true, 8, 64, 0},     {0, false, false, 4, false, true, 8, 64, 0},   // varlen; non-causal
    {1, true, false, 4, true, false, 8, 64, 0},    {2, false, true, 1, false, true, 512, 64, 1},  // explicit orders
    {2, true, false, 4, false, true, 512, 64, 1},  {1, true, false, 1, false, true, 8, 64, 0},
    {3, true, false, 4, false, true, 512, 64, 2},  {3, false, true, 1, true, false, 8, 64, 2},
    {0, true, false, 1, true, false, 20, 32, 1, 64},  {0, true, false, 1, true, false, 48, 32, 1, 64},  // d64 MHA
    {0, true, false, 1, true, false, 49, 32, 0, 64},  {0, true, false, 1, true, false, 24, 32, 0, 128},  // persistent:
    // <= 48 pairs; d64 one CTA per tile: <= 28 pairs of <= 64 key blocks, else kOuterPairsMax (16)
    {0, true, false, 1, false, true, 24, 64, 1, 64},  {0, true, false, 1, false, true, 28, 64, 1, 64},
    {0, true, false, 1, false, true, 29, 64, 0, 64},  {0, true, false, 1, false, true, 20, 65, 0, 64},
    {0, true, false, 1, false, true, 16, 96, 1, 64},  {0, true, false, 1, false, true, 24, 64, 0, 128},
};
// clang-format on

// static_deal_gives_way (bwd_deal_model.cuh) on 132 SMs: head dim, causal, the real group, grid_order, batch, seqlen
// (query = key), heads -> one CTA per tile instead of auto's persistent deal. The first five are s54c's measured
// shapes where one CTA per tile won 1.08-1.23x (H100; one 8k x 28 heads modelled only), then shapes where persistent
// measured ahead or level (s50c / s51a / s54c), then calls the rule leaves alone.
struct DealCase {
  int headdim;
  bool causal;
  int group, grid_order, batch, seqlen, heads;
  bool gives_way;
};

// clang-format off
constexpr DealCase kDealCases[] = {
    {128, true, 1, 0, 1, 8192, 24, true},    {128, true, 1, 0, 1, 8192, 40, true},
    {128, true, 1, 0, 3, 8192, 16, true},    {128, true, 1, 0, 1, 4096, 48, true},
    {128, true, 1, 0, 1, 8192, 28, true},
    {128, true, 1, 0, 2, 8192, 16, false},   {128, true, 1, 0, 1, 8192, 32, false},   // the paper's; 32 heads
    {128, true, 1, 0, 6, 4096, 16, false},   {128, true, 1, 0, 5, 2048, 16, false},
    {128, true, 1, 0, 8, 2048, 16, false},   {128, true, 1, 0, 4, 4096, 16, false},
    {128, true, 1, 0, 1, 2048, 64, false},   {128, true, 1, 0, 1, 4096, 32, false},
    {128, true, 1, 0, 1, 8192, 16, false},   {128, true, 4, 0, 1, 8192, 24, false},   // <= 16 pairs; GQA
    {128, false, 1, 0, 1, 8192, 24, false},  {64, true, 1, 0, 1, 4096, 24, false},    // non-causal; d64
    {128, true, 1, 2, 1, 8192, 24, false},   {128, true, 1, 1, 1, 8192, 24, true},    // outermost; innermost asked
    {128, true, 1, 0, 1, 8192, 72, false},                                            // past 32 rounds of tiles
};
// clang-format on

int main() {
  int failures = 0;
  for (const DealCase& c : kDealCases) {
    const bool got = fa3nn::hopper::host::static_deal_gives_way(c.headdim, c.causal, false, c.group, c.grid_order,
                                                                static_cast<long long>(c.batch) * c.heads,
                                                                c.seqlen / 128, c.seqlen, c.seqlen, 128, 64, 132);
    if (got != c.gives_way) {
      ++failures;
      std::printf("FAIL deal headdim %d causal %d group %d order %d batch %d seqlen %d heads %d: gives way %d\n",
                  c.headdim, c.causal, c.group, c.grid_order, c.batch, c.seqlen, c.heads, got);
    }
  }
  for (const OrderCase& c : kOrderCases) {
    const int got = fa3nn::hopper::host::tile_order(c.grid_order, c.headdim, c.causal, c.varlen, c.group,
                                                    c.auto_persistent, c.per_tile, c.pairs, c.n_blocks);
    if (got != c.order) {
      ++failures;
      std::printf("FAIL order %d d%d causal %d varlen %d group %d persistent %d per tile %d pairs %lld blocks %d: %d\n",
                  c.grid_order, c.headdim, c.causal, c.varlen, c.group, c.auto_persistent, c.per_tile, c.pairs,
                  c.n_blocks, got);
    }
  }
  for (const AutoCase& c : kAutoCases) {
    const bool got = fa3nn::hopper::host::auto_persistent_bwd(c.ctas, c.headdim, c.causal, c.varlen, c.local, 1,
                                                               c.seqlen_q, false);
    if (got != c.persistent) {
      ++failures;
      std::printf("FAIL auto ctas %d headdim %d causal %d varlen %d local %d seqlen_q %d: persistent %d\n", c.ctas,
                  c.headdim, c.causal, c.varlen, c.local, c.seqlen_q, got);
    }
  }
  for (const Case& c : kCases) {
    const bool got = fa3nn::hopper::host::use_persistent_bwd(c.headdim, c.causal, c.group, c.seqlen_q,
                                                              c.skips_empty_tiles, c.panel_split);
    if (got != c.persistent) {
      ++failures;
      std::printf("FAIL headdim %d causal %d group %d seqlen_q %d skips_empty %d panel_split %d: persistent %d\n",
                  c.headdim, c.causal, c.group, c.seqlen_q, c.skips_empty_tiles, c.panel_split, got);
    }
  }
  std::printf("%zu backward schedules checked; %d failures\n",
              sizeof(kCases) / sizeof(kCases[0]) + sizeof(kAutoCases) / sizeof(kAutoCases[0]) +
                  sizeof(kOrderCases) / sizeof(kOrderCases[0]) + sizeof(kDealCases) / sizeof(kDealCases[0]),
              failures);
  return failures != 0;
}
