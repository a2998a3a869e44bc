// Host-only: the balance model behind the causal forward's choice of deal (flash_fwd_launch.cuh, make_params). The
// default deals one (batch, head) pair per longest-first section, boustrophedon (scheduler.cuh), which keeps each
// pair's K/V in L2 while its query blocks run and balances the SMs where a round of CTAs takes whole pairs' ramps
// evenly: the paper's shapes (32 pairs at 8k, 128 at 2k) simulate at max / mean 1.03. With few pairs a round holds
// one or two ramps and the CTA that took a ramp's long tiles in one round does not get its short ones back: one 8k
// sequence x 8 / 16 / 24 heads at d128 simulates 1.76 / 1.52 / 1.27, where one longest-first section over every tile
// (the deal beyond the one-pair lengths) simulates 1.01 (scripts/simulate_causal_balance.py, the same model: each
// tile's key blocks + 1 on the CTA the deal gives it). Measured (H100, s55b) one section x the one-pair deal: 1.61 /
// 1.47 / 1.22 there; the FP8 forward's 128 x 256 tiles at one 4k x 8 / 16 / 24 heads 1.52 / 1.37 / 1.23 (s56a;
// flash_fwd_launch.cuh, fill_fwd_params, has the rest).
#pragma once

#include "scheduler.cuh"

namespace fa3nn::hopper::host {

// Past this many rounds of tiles per CTA the deal's imbalance is small against each CTA's work, and the model is not
// run (O(tiles) on the host).
constexpr long long kFwdDealModelMaxRounds = 64;

// max / mean per-CTA work of the causal static deal over `pairs` pairs of num_m_blocks query blocks, sections of
// `per_section` pairs, rounds of `grid` tiles, odd rounds reversed when `snake`: each CTA walks its tiles with the
// kernels' own scheduler (scheduler.cuh StaticPersistentScheduler, longest-first decode), so the model deals exactly
// as they do. A tile's work: its key blocks + 1.
inline double fwd_deal_imbalance(int num_m_blocks, int block_m, int block_n, int seqlen_q, int seqlen_k,
                                 long long pairs, long long per_section, bool snake, int grid) {
  if (grid <= 0 || pairs <= 0 || num_m_blocks <= 0) return 1.0;
  // The deal sees (batch, head) pairs only: `pairs` heads of one batch.
  const TileDeal deal = TileDeal::make(num_m_blocks, static_cast<int>(pairs), 1, static_cast<int>(per_section),
                                       snake ? 1 : 0, grid);
  double most = 0.0, total = 0.0;
  for (int cta = 0; cta < grid; ++cta) {
    const StaticPersistentScheduler<true> walk(deal, cta);
    double work = 0.0;
    for (int tile = walk.first(); walk.valid(tile); tile = walk.next(tile)) {
      long long keys = (walk.decode(tile).m_block + 1LL) * block_m + (seqlen_k - seqlen_q);
      keys = keys < 0 ? 0 : (keys > seqlen_k ? seqlen_k : keys);
      work += double((keys + block_n - 1) / block_n + 1);
    }
    most = work > most ? work : most;
    total += work;
  }
  return total > 0.0 ? most * grid / total : 1.0;
}

// Whether one section over every tile is modelled to balance the SMs better than one pair per section by more than
// `margin` (the one-pair deal's measured L2 advantage at the paper's shapes, +3-7%, is what the margin keeps). The
// last answer is kept per host thread: every layer of a step asks with one shape.
inline bool one_section_balances_better(int num_m_blocks, int block_m, int block_n, int seqlen_q, int seqlen_k,
                                        long long pairs, int grid, double margin) {
  if (grid <= 0 || pairs * num_m_blocks > kFwdDealModelMaxRounds * grid) return false;
  struct Last {
    int num_m_blocks = -1, block_m = 0, block_n = 0, seqlen_q = 0, seqlen_k = 0, grid = 0;
    long long pairs = 0;
    double margin = 0.0;
    bool answer = false;
  };
  thread_local Last last;
  if (last.num_m_blocks == num_m_blocks && last.block_m == block_m && last.block_n == block_n &&
      last.seqlen_q == seqlen_q && last.seqlen_k == seqlen_k && last.grid == grid && last.pairs == pairs &&
      last.margin == margin)
    return last.answer;
  const double one_pair =
      fwd_deal_imbalance(num_m_blocks, block_m, block_n, seqlen_q, seqlen_k, pairs, 1, true, grid);
  const double one_section =
      fwd_deal_imbalance(num_m_blocks, block_m, block_n, seqlen_q, seqlen_k, pairs, pairs, true, grid);
  const bool answer = one_pair > one_section * (1.0 + margin);
  last = Last{num_m_blocks, block_m, block_n, seqlen_q, seqlen_k, grid, pairs, margin, answer};
  return answer;
}

}  // namespace fa3nn::hopper::host
