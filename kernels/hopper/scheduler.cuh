// Persistent tile scheduler: one CTA per SM walks tiles blockIdx.x, blockIdx.x + gridDim.x, ... Every role of the
// CTA (producer and consumers) walks the same sequence independently, so no tile index crosses warpgroups.
//
// Order: non-causal tiles go m_block-fastest, so CTAs running together read the same head's K/V (L2 reuse).
// Causal tiles go longest-first (m_block descending, outermost), so the short diagonal tiles fill the tail of the
// schedule and balance the SMs (longest-processing-time first).
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
  int num_tiles;

  __device__ __forceinline__ StaticPersistentScheduler(int num_m_blocks_, int num_heads_, int batch)
      : num_m_blocks(num_m_blocks_), num_heads(num_heads_), num_tiles(num_m_blocks_ * num_heads_ * batch) {}

  __device__ __forceinline__ int first() const { return blockIdx.x; }
  __device__ __forceinline__ int next(int tile) const { return tile + gridDim.x; }
  __device__ __forceinline__ bool valid(int tile) const { return tile < num_tiles; }

  __device__ __forceinline__ Tile decode(int tile) const {
    Tile t;
    if constexpr (kLongestFirst) {
      const int bh = num_heads * (num_tiles / (num_m_blocks * num_heads));
      t.m_block = num_m_blocks - 1 - tile / bh;
      const int rest = tile % bh;
      t.head = rest % num_heads;
      t.batch = rest / num_heads;
    } else {
      t.m_block = tile % num_m_blocks;
      const int bh = tile / num_m_blocks;
      t.head = bh % num_heads;
      t.batch = bh / num_heads;
    }
    return t;
  }
};

}  // namespace fa3nn::hopper
