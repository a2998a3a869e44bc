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

namespace fa3nn::hopper {

struct Tile {
  int m_block;
  int head;
  int batch;
};

template <bool kLongestFirst>
struct StaticPersistentScheduler {
  int num_m_blocks;
  int num_heads;
  int num_bh;             // batch * num_heads
  int heads_per_section;  // (batch, head) pairs per longest-first section
  bool snake;             // boustrophedon deal (causal only)

  __device__ __forceinline__ StaticPersistentScheduler(int num_m_blocks_, int num_heads_, int batch,
                                                       int heads_per_section_, int boustrophedon_)
      : num_m_blocks(num_m_blocks_),
        num_heads(num_heads_),
        num_bh(num_heads_ * batch),
        heads_per_section(heads_per_section_),
        snake(boustrophedon_ != 0) {}

  __device__ __forceinline__ bool boustrophedon() const { return kLongestFirst && snake; }

  __device__ __forceinline__ int first() const { return blockIdx.x; }
  __device__ __forceinline__ int next(int tile) const {
    if (!boustrophedon()) return tile + gridDim.x;
    const int round = tile / gridDim.x + 1;
    return round * gridDim.x + ((round & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
  }
  __device__ __forceinline__ bool valid(int tile) const { return tile < num_m_blocks * num_bh; }

  __device__ __forceinline__ Tile decode(int tile) const {
    Tile t;
    int bh;
    if constexpr (kLongestFirst) {
      const int section_tiles = heads_per_section * num_m_blocks;
      const int section = tile / section_tiles;
      const int first_bh = section * heads_per_section;
      const int heads_here = min(heads_per_section, num_bh - first_bh);  // the last section may be short
      const int i = tile - section * section_tiles;
      t.m_block = num_m_blocks - 1 - i / heads_here;
      bh = first_bh + i % heads_here;
    } else {
      t.m_block = tile % num_m_blocks;
      bh = tile / num_m_blocks;
    }
    t.head = bh % num_heads;
    t.batch = bh / num_heads;
    return t;
  }
};

}  // namespace fa3nn::hopper
