// Online softmax for the FP8 forward: per-block score scales and probabilities sized for an e4m3 cast.
//
// Differences from OnlineSoftmax (softmax.cuh), each a rounding point of fa3nn/fp8/reference.py:
//   * Scores arrive as raw Q8 K8^T sums. Each row of a key block has its own factor
//     c = q_descale[query tile] * k_descale[key tile] * softmax_scale * log2(e), applied in fp32 (step 3); since c > 0
//     the row max is taken on the raw sums and multiplied once. The running max is kept scaled (log2 units) because
//     c changes from key block to key block.
//   * P is produced as 2^8 * exp(S - m) (FlashAttention-3's max offset of 8 inside the exp2), so the largest
//     probability lands on 256, inside e4m3's 448, and the e4m3 cast keeps probabilities down to 2^-17 (step 5).
//     The row sum adds these same fp32 values before any rounding (step 4); the 2^8 is exact and divides out in
//     finalize.
#pragma once
#include <cstdint>

#include "softmax.cuh"

namespace fa3nn::hopper {

template <int kCols>  // columns of the score tile (kBlockN)
struct OnlineSoftmaxFp8 {
  static constexpr int kRegs = kCols / 2;
  static constexpr float kMaxOffset = 8.f;  // log2 of the P scale, 256
  float row_max[2];  // max of c * S over the keys seen, log2 units; -inf before any attended key
  float row_sum[2];  // per-thread partial sums of 2^8 * P; quad-reduced once, in finalize()

  __device__ __forceinline__ void reset() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
  }

  // Raw scores -> 2^8 * probabilities in place. c[r] is row r's score factor for this key block (log2 units);
  // o_scale[r] rescales row r of the output accumulator to the new maximum (0 while nothing was accumulated).
  __device__ __forceinline__ void step(float (&s)[kRegs], const float (&c)[2], float (&o_scale)[2]) {
    float sub[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float tile_max = quad_max(OnlineSoftmax<kCols>::template row_reduce<true>(s, r)) * c[r];
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row that has attended nothing keeps max -inf; subtract 0 there so its probabilities are 0, not NaN.
      const float safe_max = new_max == -INFINITY ? 0.f : new_max;
      o_scale[r] = fast_exp2(row_max[r] - safe_max);
      row_max[r] = new_max;
      sub[r] = safe_max - kMaxOffset;
    }
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i] = fast_exp2(fmaf(s[i], c[(i >> 1) & 1], -sub[(i >> 1) & 1]));
#pragma unroll
    for (int r = 0; r < 2; ++r)
      row_sum[r] = row_sum[r] * o_scale[r] + OnlineSoftmax<kCols>::template row_reduce<false>(s, r);
  }

  // Per row: 1 / (2^8 * l) (0 for a row that attended nothing) and the natural-log lse m + log(l) (-inf there).
  __device__ __forceinline__ void finalize(float (&inv_sum)[2], float (&lse)[2]) const {
    constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const bool empty = !(sum > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / sum;
      lse[r] = empty ? -INFINITY : (row_max[r] - kMaxOffset + __log2f(sum)) * kLn2;
    }
  }
};

}  // namespace fa3nn::hopper
