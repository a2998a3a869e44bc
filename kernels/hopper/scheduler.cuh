// Persistent tile scheduler: one CTA per SM walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... Every role of the
// CTA (producer and consumers) walks the same sequence independently, so no tile index crosses warpgroups.
//
// Order: non-causal tiles go m_block-fastest, so CTAs running together read the same head's K/V (L2 reuse).
// Causal tiles go longest-first (m_block descending) so the short diagonal tiles fill the tail and balance the SMs,
// but only within sections of `heads_per_section` (batch, head) pairs whose K/V fit in about half the L2: a plain
// longest-first order over all heads spreads one head's tiles across the whole run, and every m-block re-reads its
// K/V from DRAM (ncu on d128 causal seqlen 512: DRAM 73% busy, tensor pipe 37%).
//
// Causal calls with one section deal their rounds of gridDim.x tiles boustrophedon: even rounds in CTA order, odd
// rounds reversed, so the CTA that got the longest tile of one round gets the shortest of the next. A host-side
// simulation of per-SM work (key blocks + 1 per tile, scripts/simulate_causal_balance.py) gives max/mean 1.13 -> 1.00
// for d256 causal 16k, 1.07 -> 1.00 for d128 causal 16k, 1.04 -> 1.00 for d64 causal 16k. With L2-sized sections it
// helps no more (d256 causal 1024: 1.13 -> 1.38 in the same simulation), so those keep the plain round-robin; with
// one (batch, head) pair per section it gives 1.03 at d128 <= 8192 and d256 <= 4096, and that is the default there
// (measured +3-7% at d128 causal 2048-8192, +5-20% at d256 causal 512-4096 over L2-sized round-robin sections; the
// launcher's Problem::causal_deal). The launcher decides (FwdParams::boustrophedon); the producer and consumers walk
// the same deal.
#pragma once
#include <cstdint>

#include "fast_div.cuh"

namespace fa3nn::hopper {

struct Tile {
  int m_block;
  int head;
  int batch;
};

// The deal's launch-wide counts with their divisors, built on the host (TileDeal::make) and passed in the kernel's
// parameters: every division by a launch-wide count is a FastDiv (fast_div.cuh) read from the constant bank, so the
// per-tile decode is a few multiply-highs instead of four runtime int divisions and costs no registers to hold.
struct TileDeal {
  int num_m_blocks;
  int num_bh;             // batch * num_heads
  int heads_per_section;  // (batch, head) pairs per longest-first section
  int grid;               // CTAs of the launch (gridDim.x)
  int snake;              // 1: boustrophedon deal (causal only)
  FastDiv heads;          // num_heads: (batch, head) pair -> batch, head
  FastDiv m_blocks;       // num_m_blocks (m_block-fastest order)
  FastDiv section_tiles;  // heads_per_section * num_m_blocks
  FastDiv section_heads;  // heads_per_section
  FastDiv last_heads;     // (batch, head) pairs in the last section, which may be short
  FastDiv ctas;           // grid

  static TileDeal make(int num_m_blocks, int num_heads, int batch, int heads_per_section, int boustrophedon,
                       int grid) {
    const int num_bh = num_heads * batch;
    return TileDeal{num_m_blocks, num_bh, heads_per_section, grid, boustrophedon != 0 ? 1 : 0, FastDiv(num_heads),
                    FastDiv(num_m_blocks), FastDiv(heads_per_section * num_m_blocks), FastDiv(heads_per_section),
                    FastDiv(num_bh - (num_bh - 1) / heads_per_section * heads_per_section), FastDiv(grid)};
  }
};

template <bool kLongestFirst>
struct StaticPersistentScheduler {
  const TileDeal& deal;
  int cta;  // blockIdx.x

  __device__ __forceinline__ explicit StaticPersistentScheduler(const TileDeal& deal_)
      : deal(deal_), cta(static_cast<int>(blockIdx.x)) {}
  // The walk of CTA `cta_` (the host-side tests construct it directly).
  __host__ __device__ __forceinline__ StaticPersistentScheduler(const TileDeal& deal_, int cta_)
      : deal(deal_), cta(cta_) {}

  __host__ __device__ __forceinline__ bool boustrophedon() const { return kLongestFirst && deal.snake != 0; }

  __host__ __device__ __forceinline__ int first() const { return cta; }
  __host__ __device__ __forceinline__ int next(int tile) const {
    if (!boustrophedon()) return tile + deal.grid;
    const int round = deal.ctas.div(tile) + 1;
    return round * deal.grid + ((round & 1) ? deal.grid - 1 - cta : cta);
  }
  __host__ __device__ __forceinline__ bool valid(int tile) const { return tile < deal.num_m_blocks * deal.num_bh; }

  __host__ __device__ __forceinline__ Tile decode(int tile) const {
    Tile t;
    int bh;
    if constexpr (kLongestFirst) {
      int i;
      const int section = deal.section_tiles.divmod(tile, i);
      const int first_bh = section * deal.heads_per_section;
      const FastDiv here = first_bh + deal.heads_per_section > deal.num_bh ? deal.last_heads : deal.section_heads;
      int pair;
      t.m_block = deal.num_m_blocks - 1 - here.divmod(i, pair);
      bh = first_bh + pair;
    } else {
      bh = deal.m_blocks.divmod(tile, t.m_block);
    }
    t.batch = deal.heads.divmod(bh, t.head);
    return t;
  }
};

}  // namespace fa3nn::hopper
