// Host-only: the schedule model behind one of auto's backward choices (flash_bwd_launch.cuh, launch_bwd). Auto runs
// d128's causal MHA backward of 2048-8192 query rows persistent (one CTA per SM, each walking the tiles blockIdx.x +
// k * gridDim.x with round k dealt boustrophedon; BwdCtaTiles), key blocks innermost over more than 16 (head, batch)
// pairs. That static deal balances only where the tile count suits the SMs: a causal key block n of nb walks nb - n
// blocks of queries, and a round of SMs tiles takes one or two pairs' whole key-block ramps, so some CTAs get the long
// tiles of two ramps and others the short ones. One CTA per tile is list scheduling instead (each tile, in launch
// order, to the SM that frees up first) at the cost of a launch per tile. The model (no L2, scripts/
// model_bwd_gqa_parts.py's per_tile / persistent) counts each tile's query rows, plus 128 rows per launched tile and
// 38.4 per chained one, and compares the busy shares. H100, s54c (scripts/bwd_schedule_grid.py, causal d128,
// per tile innermost x persistent innermost, measured / modelled): one 8k x 24 heads 1.23 / 1.17, one 8k x 40 1.11 /
// 1.11, 3 x 8k x 16 1.09 / 1.13, one 4k x 48 1.09 / 1.05, 6 x 4k x 16 0.94 / 0.95, the paper's 2 x 8k x 16 ~0.97 /
// 0.955 (s51a), one 8k x 32 0.95 / 0.96 (s51a), 5 x 2k x 16 1.02 / 0.94 (the one miss: the model keeps persistent).
#pragma once

#include <functional>
#include <queue>
#include <vector>

namespace fa3nn::hopper::host {

// Query rows a launched tile costs beside its own (K/V loads, prologue, dK / dV stores), and a chained one: the
// model's 1 and 0.3 key-block rows of 128 (scripts/model_bwd_gqa_parts.py).
constexpr double kTileLaunchRows = 128.0, kTileChainRows = 38.4;
// Past this many rounds of SMs tiles the static deal's imbalance (at most one ramp per CTA) is small against each
// CTA's work, and the model is not run (it costs O(tiles log SMs) on the host).
constexpr long long kDealModelMaxRounds = 32;

// Query rows of causal key block n (bottom-right aligned, as first_m_block in flash_bwd.cuh) in whole query blocks.
inline double causal_tile_rows(int n, int block_n, int block_m, int seqlen_q, int seqlen_k) {
  const int m_blocks = (seqlen_q + block_m - 1) / block_m;
  const int first_row = n * block_n - (seqlen_k - seqlen_q);
  const int first_m = first_row <= 0 ? 0 : first_row / block_m;
  return first_m >= m_blocks ? 0.0 : double(m_blocks - first_m) * block_m;
}

// Busy shares (work over SMs x the last SM's finish) of `pairs` (head, batch) pairs' causal tiles in key-blocks-
// innermost order, dealt statically (persistent) or listed to the first free SM (one CTA per tile).
inline double static_deal_busy(long long pairs, const std::vector<double>& ramp, int sms) {
  const long long nb = static_cast<long long>(ramp.size()), tiles = pairs * nb;
  std::vector<double> load(sms, 0.0);
  double work = 0.0;
  for (long long t = 0; t < tiles; ++t) {
    const long long round = t / sms, slot = t % sms;
    load[round & 1 ? sms - 1 - slot : slot] += ramp[t % nb] + kTileChainRows;
    work += ramp[t % nb];
  }
  double finish = 0.0;
  for (const double l : load) finish = l > finish ? l : finish;
  return finish > 0.0 ? work / (sms * finish) : 1.0;
}

inline double per_tile_busy(long long pairs, const std::vector<double>& ramp, int sms) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int s = 0; s < sms; ++s) free_at.push(0.0);
  double work = 0.0, finish = 0.0;
  for (long long p = 0; p < pairs; ++p) {
    for (const double rows : ramp) {
      const double end = free_at.top() + rows + kTileLaunchRows;
      free_at.pop();
      free_at.push(end);
      finish = end > finish ? end : finish;
      work += rows;
    }
  }
  return finish > 0.0 ? work / (sms * finish) : 1.0;
}

// Whether one CTA per tile is modelled busier than the static deal for these causal tiles (at most
// kDealModelMaxRounds rounds of SMs; beyond, false). The last call's answer is kept per host thread: every layer of a
// step asks with the same shape.
inline bool per_tile_beats_static_deal(long long pairs, int block_n, int block_m, int seqlen_q, int seqlen_k,
                                       int sms) {
  const int nb = (seqlen_k + block_n - 1) / block_n;
  if (sms <= 0 || pairs <= 0 || nb <= 0 || pairs * nb > kDealModelMaxRounds * sms) return false;
  struct Last {
    long long pairs = -1;
    int block_n = 0, block_m = 0, seqlen_q = 0, seqlen_k = 0, sms = 0;
    bool answer = false;
  };
  thread_local Last last;
  if (last.pairs == pairs && last.block_n == block_n && last.block_m == block_m && last.seqlen_q == seqlen_q &&
      last.seqlen_k == seqlen_k && last.sms == sms)
    return last.answer;
  std::vector<double> ramp(nb);
  for (int n = 0; n < nb; ++n) ramp[n] = causal_tile_rows(n, block_n, block_m, seqlen_q, seqlen_k);
  const bool answer = per_tile_busy(pairs, ramp, sms) > static_deal_busy(pairs, ramp, sms);
  last = Last{pairs, block_n, block_m, seqlen_q, seqlen_k, sms, answer};
  return answer;
}

}  // namespace fa3nn::hopper::host
