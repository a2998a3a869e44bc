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

#include "e4m3_exp2.cuh"
#include "softmax.cuh"

namespace fa3nn::hopper {

// 2^x for x <= 8 on the FP32 pipe instead of MUFU (FlashAttention-4's way to unload the 16/clk/SM exp unit, which
// at head dim 128 in FP8 needs as many clocks as the tensor cores). x = j + f with j = round(x) from the 1.5 * 2^23
// magic add, 2^f on [-0.5, 0.5] by a degree-4 polynomial (coefficients fitted for this file: max relative error
// 5.2e-6, against e4m3's 2^-4 step for P), j added to the exponent bits. The clamp at -127 makes a masked score
// (-inf) exactly 0: j = -127, f = 0, p = 1.0 and the exponent field becomes 0.
__device__ __forceinline__ float exp2_poly(float x) {
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds x to an integer in the low mantissa bits
  x = fmaxf(x, -127.f);
  const float t = __fadd_rn(x, kMagic);
  const float f = __fsub_rn(x, __fsub_rn(t, kMagic));
  float p = fmaf(0.009627114423651745f, f, 0.05598684558650056f);
  p = fmaf(p, f, 0.240233179697081f);
  p = fmaf(p, f, 0.6931088582133003f);
  p = fmaf(p, f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

// Timing-only cuts of the softmax for benchmark builds (WRONG probabilities; never dispatched by the library): what
// the loop costs without one of its parts. kSoftmaxNoExp2: P = the exp2 argument itself (no MUFU); kSoftmaxNoRowMax:
// each row's "tile max" is its first score (no max tree, no quad shuffles; the running max and O rescale stay).
enum SoftmaxCut : int { kSoftmaxFull = 0, kSoftmaxNoExp2 = 1, kSoftmaxNoRowMax = 2 };

// kCols: columns of the score tile (kBlockN). kPolyEvery > 0: every kPolyEvery-th score's exp2 runs exp2_poly;
// kPolyEvery < 0: the P fragment registers linear_exp2_register<-kPolyEvery> picks get the linear exp2's argument
// y = 8 x + kLinearBias (e4m3_exp2.cuh) instead of 2^x, for p_to_fp8_fragments<kCols, -kPolyEvery> to pack.
// kCut: SoftmaxCut (benchmark builds only). kIntMax: the row max from positive_row_max, and the float tree only in
// a warp whose rows include one without a positive score (bitwise the same maxima either way). kMmaRowSum: step()
// adds no row sums; the caller adds each block's sums of P8 from the P V GEMM (add_block_sums), which every thread
// of a quad holds whole, so finalize() does not reduce over the quad.
template <int kCols, int kPolyEvery = 0, int kCut = kSoftmaxFull, bool kIntMax = false, bool kMmaRowSum = false>
struct OnlineSoftmaxFp8 {
  // The linear exp2 leaves y, not P, in s: the row sums of such a kernel must come from its P V GEMM.
  static_assert(kPolyEvery >= 0 || kMmaRowSum, "the linear exp2 (kPolyEvery < 0) needs kMmaRowSum");
  static constexpr int kRegs = kCols / 2;
  static constexpr float kMaxOffset = 8.f;  // log2 of the P scale, 256
  float row_max[2];  // max of c * S over the keys seen, log2 units; -inf before any attended key
  float row_sum[2];  // per-thread partial sums of 2^8 * P; quad-reduced once, in finalize()

  // This thread's maxima of its two rows (before the quad reduction). first_half_max as in step().
  __device__ __forceinline__ void thread_maxima(const float (&s)[kRegs], const float* first_half_max,
                                                float (&thread_max)[2]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if constexpr (kIntMax) {
        thread_max[r] = first_half_max != nullptr ? fmaxf(first_half_max[r],
                                                          positive_row_max<kRegs, kRegs / 2, kRegs / 2>(s, r))
                                                  : positive_row_max<kRegs, 0, kRegs>(s, r);
      } else {
        thread_max[r] = first_half_max != nullptr
                            ? fmaxf(first_half_max[r],
                                    OnlineSoftmax<kCols>::template row_reduce<true, kRegs / 2, kRegs / 2>(s, r))
                            : OnlineSoftmax<kCols>::template row_reduce<true>(s, r);
      }
    }
  }

  // The early row maxima of S's first half for step() (kSplitS), in this softmax's form.
  __device__ __forceinline__ static float early_max(const float (&s)[kRegs], int r) {
    if constexpr (kIntMax) return positive_row_max<kRegs, 0, kRegs / 2>(s, r);
    else return OnlineSoftmax<kCols>::template row_reduce<true, 0, kRegs / 2>(s, r);
  }

  __device__ __forceinline__ void reset() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
  }

  // Raw scores -> 2^8 * probabilities in place. c[r] is row r's score factor for this key block (log2 units);
  // o_scale[r] rescales row r of the output accumulator to the new maximum (0 while nothing was accumulated).
  // first_half_max (split S, flash_fwd_fp8.cuh kSplitS): this thread's raw row maxima over the first kRegs / 2
  // registers, taken while the second half's Q K^T was still on the tensor cores; nullptr: the whole tree here.
  __device__ __forceinline__ void step(float (&s)[kRegs], const float (&c)[2], float (&o_scale)[2],
                                       const float* first_half_max = nullptr) {
    float sub[2], thread_max[2], quad_maxima[2] = {s[0], s[2]};  // (the cut's "tile max": each row's first score)
    if constexpr (kCut != kSoftmaxNoRowMax) {
      thread_maxima(s, first_half_max, thread_max);
#pragma unroll
      for (int r = 0; r < 2; ++r) quad_maxima[r] = quad_max(thread_max[r]);
    }
    if constexpr (kIntMax && kCut != kSoftmaxNoRowMax) {
      // A row without a positive score (masked, or all its scores <= 0) needs the float tree; warp-uniform.
      if (__any_sync(0xffffffffu, !(quad_maxima[0] > 0.f) || !(quad_maxima[1] > 0.f))) {
#pragma unroll
        for (int r = 0; r < 2; ++r) quad_maxima[r] = quad_max(OnlineSoftmax<kCols>::template row_reduce<true>(s, r));
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float tile_max = quad_maxima[r] * c[r];
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row that has attended nothing keeps max -inf; subtract 0 there so its probabilities are 0, not NaN.
      const float safe_max = new_max == -INFINITY ? 0.f : new_max;
      o_scale[r] = fast_exp2(row_max[r] - safe_max);
      row_max[r] = new_max;
      sub[r] = safe_max - kMaxOffset;
    }
    float linear_c[2], linear_b[2];  // (kPolyEvery < 0) y = 8 x + bias = s 8 c_r + (bias - 8 sub_r): one FFMA
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      linear_c[r] = c[r] * kLinearScale;
      linear_b[r] = fmaf(-sub[r], kLinearScale, kLinearBias);
    }
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      const float x = fmaf(s[i], c[(i >> 1) & 1], -sub[(i >> 1) & 1]);
      if constexpr (kCut == kSoftmaxNoExp2) s[i] = x;
      else if constexpr (kPolyEvery < 0)
        s[i] = linear_exp2_register<-kPolyEvery>(i / 16, fragment_slot(i))
                   ? fmaf(s[i], linear_c[(i >> 1) & 1], linear_b[(i >> 1) & 1])
                   : fast_exp2(x);
      else if constexpr (kPolyEvery > 0) s[i] = i % kPolyEvery == kPolyEvery - 1 ? exp2_poly(x) : fast_exp2(x);
      else s[i] = fast_exp2(x);
    }
    if constexpr (!kMmaRowSum) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
        row_sum[r] = row_sum[r] * o_scale[r] + OnlineSoftmax<kCols>::template row_reduce<false>(s, r);
    }
  }

  // kMmaRowSum: one block's sums of 2^8 P8 per row (sum0: row r0, sum1: r1); scale: that block's o_scale from step().
  __device__ __forceinline__ void add_block_sums(const float (&scale)[2], float sum0, float sum1) {
    row_sum[0] = fmaf(row_sum[0], scale[0], sum0);
    row_sum[1] = fmaf(row_sum[1], scale[1], sum1);
  }

  // Per row: 1 / (2^8 * l) (0 for a row that attended nothing) and the natural-log lse m + log(l) (-inf there).
  __device__ __forceinline__ void finalize(float (&inv_sum)[2], float (&lse)[2]) const {
    constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = kMmaRowSum ? row_sum[r] : quad_sum(row_sum[r]);
      const bool empty = !(sum > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / sum;
      lse[r] = empty ? -INFINITY : (row_max[r] - kMaxOffset + __log2f(sum)) * kLn2;
    }
  }
};

}  // namespace fa3nn::hopper
