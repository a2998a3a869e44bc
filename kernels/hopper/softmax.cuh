// Online softmax over the rows a consumer thread owns in a wgmma m64nN fp32 accumulator.
//
// Accumulator layout (HOPPER_PRIMER.md section 2): thread (warp w, lane l) holds rows r0 = 16w + l/4 and r1 = r0 + 8;
// element i belongs to row r0 + 8*((i>>1)&1) and column 8*(i>>2) + 2*(l%4) + (i&1). A row lives in the 4 lanes of a
// quad, so row reductions are in-thread followed by two xor-shuffles (1, 2).
//
// Everything is in exp2 with the softmax scale folded in: p = 2^(s*scale_log2 - m*scale_log2), one FFMA + one
// MUFU.EX2 per element. Masked scores are -inf. A row whose maximum is still -inf (it has attended nothing yet) uses 0
// as its subtrahend, so its probabilities are exp2(-inf) = 0 rather than NaN.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) = 1 - 2 / (2^(2x log2 e) + 1): two MUFU ops (EX2, RCP), accurate to a few 1e-7 and saturating cleanly
// (2^x overflows to inf, 1 / inf = 0). The formula of the Triton kernels (kernels.py, _tanh), whose backward
// recomputes P from this forward's lse: MUFU.TANH (tanh.approx.f32, FlashAttention-3's choice, one op) errs by about
// 2^-11 relative, up to cap * 2^-11 in a capped score (0.015 at cap 30), and a backward with the accurate tanh would
// then see rows of P that do not sum to 1.
__device__ __forceinline__ float softcap_tanh(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fast_exp2(x * 2.8853900817779268f) + 1.f));  // 2 log2 e
  return 1.f - 2.f * r;
}

// tanh(x) = x Q(x^2) for |x| <= kTanhPolyBound: eight FMA-pipe instructions (z = x^2, Horner's six FFMA, x Q), no
// MUFU. Q of degree 6 fitted for relative error (scripts/tanh_poly_fit.py, tests/test_softcap_tanh.py): at most
// 1.2e-7 absolute / 1.6e-7 relative on [-1, 1] in float32 (softcap_tanh's EX2 + RCP: a few 1e-7 absolute, more
// relative near 0), so the two agree to ~2e-7 and either side's backward recomputes the other's P.
constexpr float kTanhPolyBound = 1.f;
__device__ __forceinline__ float tanh_poly(float x) {
  const float z = x * x;
  float q = 1.041022246e-03f;
  q = fmaf(q, z, -6.203378085e-03f);
  q = fmaf(q, z, 2.028997988e-02f);
  q = fmaf(q, z, -5.345702916e-02f);
  q = fmaf(q, z, 1.332520396e-01f);
  q = fmaf(q, z, -3.333283961e-01f);
  q = fmaf(q, z, 9.999999404e-01f);
  return x * q;
}

// Where tanh_poly pays (softcap_scores' kPoly): head dim 64, whose tensor work per score is half d128's, so the
// softcap kernels there are bound by the two MUFU ops per score that it removes. H200, cap 30, bf16 (s33b, the
// balanced-tree build against softcap_tanh everywhere): forward d64 causal 16k 217 -> 265 TFLOP/s (+22%), windows
// (1024, 0) / (4096, 0) +3-9%; backward d64 +1-10%. At d128 / d256 the FMA / ALU work that replaces the MUFU ops cost as
// much (forward -4..+7%, backward -5..+1%), and a warp that takes the slow path pays the max and the vote on top (cap 2
// on N(0, 1) scores, d128 16k: forward -7%, backward -6%; d64 pays that on such inputs too), so those keep
// softcap_tanh alone.
__host__ __device__ constexpr bool tanh_poly_pays(int head_dim) { return head_dim == 64; }

// max |s| over a fragment as a balanced tree (the first level takes two |.| operands, FMNMX's free modifier): kRegs - 1
// FMNMX like a loop's chain, but log2 depth; the chain compiled to 88 dependent FMNMX (4 cycles each) in d128's
// 128 x 176 tiles, ~350 cycles per key block with the other pipes idle (SASS stall counts, s33a).
template <int kRegs>
__device__ __forceinline__ float abs_max(const float (&s)[kRegs]) {
  static_assert(kRegs % 2 == 0, "pairs");
  float v[kRegs / 2];
#pragma unroll
  for (int j = 0; j < kRegs / 2; ++j) v[j] = fmaxf(fabsf(s[2 * j]), fabsf(s[2 * j + 1]));
#pragma unroll
  for (int width = 1; width < kRegs / 2; width *= 2)
#pragma unroll
    for (int j = 0; j + width < kRegs / 2; j += 2 * width) v[j] = fmaxf(v[j], v[j + width]);
  return v[0];
}

// Softcap (Gemma 2): softmax(cap * tanh(score * softmax_scale / cap)). Scores become tanh(score * pre), pre =
// softmax_scale / cap, and the cap goes into the exp2's scale (scale_log2 = cap * log2 e).
// kPoly (tanh_poly_pays): where every score of the warp's fragment has |score * pre| <= kTanhPolyBound (scaled scores
// within the cap: Gemma's usual case, where the cap only clips outliers), tanh is tanh_poly on the FMA pipe; otherwise
// the whole fragment takes softcap_tanh's two MUFU ops. One vote per fragment keeps the warp on one path. pre > 0, so
// max |s| * pre is max |s * pre| exactly (the max taken after the scaling spilled 4 B in d128's causal 128 x 176
// kernels when they had the polynomial, nvcc 13.0).
template <bool kPoly, int kRegs>
__device__ __forceinline__ void softcap_scores(float (&s)[kRegs], float pre) {
  if (kPoly && __all_sync(0xffffffffu, abs_max(s) * pre <= kTanhPolyBound)) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i] = tanh_poly(s[i] * pre);
  } else {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i] = softcap_tanh(s[i] * pre);
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// The largest positive score of row `half` over S registers [kFirst, kFirst + kCount) (the m64nN accumulator
// layout of OnlineSoftmax::row_reduce), or +0 when the row has none there (every score <= 0, or masked). A float's
// bits read as a signed integer order non-negative floats as the floats, and negative floats (sign bit set) are
// negative integers, so max(bits, 0) over the row is the float maximum whenever that is positive. Integer maxes
// come three at a time on Hopper (VIMNMX3, a DPX instruction; __vimax3_s32_relu), so the tree takes ~kCount / 4
// instructions where the float tree takes kCount / 2 FMNMX, on the same half-rate ALU pipe (benchmarks/micro/
// pipe_probe.cu).
template <int kRegs, int kFirst, int kCount>
__device__ __forceinline__ float positive_row_max(const float (&s)[kRegs], int half) {
  static_assert(kFirst % 4 == 0 && kCount % 4 == 0 && kFirst + kCount <= kRegs, "whole 8-column chunks");
  constexpr int kN = kCount / 2;
  int v[kN];
#pragma unroll
  for (int j = 0; j < kN; ++j) v[j] = __float_as_int(s[kFirst + 4 * (j / 2) + 2 * half + (j % 2)]);
#pragma unroll
  for (int width = 1; width < kN; width *= 3)
#pragma unroll
    for (int j = 0; j + width < kN; j += 3 * width)
      v[j] = j + 2 * width < kN ? __vimax3_s32_relu(v[j], v[j + width], v[j + 2 * width])
                                : __vimax_s32_relu(v[j], v[j + width]);
  return __int_as_float(v[0]);
}

// kCols: columns of the score tile (kBlockN). kIntMax: each row's max from positive_row_max, the float tree only in a
// warp whose rows include one without a positive score (bitwise the same maxima).
template <int kCols, bool kIntMax = false>
struct OnlineSoftmax {
  static constexpr int kRegs = kCols / 2;
  float row_max[2];
  float row_sum[2];  // per-thread partial sums; quad-reduced once, in finalize()

  __device__ __forceinline__ void reset() {
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.f;
  }

  __device__ __forceinline__ static float scaled_max(float m, float scale_log2) {
    return m == -INFINITY ? 0.f : m * scale_log2;
  }

  // Scores -> unnormalized probabilities in place; o_scale[r] is the factor that rescales row r of the output
  // accumulator to the new maximum (exactly 1 when the maximum did not move).
  // Max (or sum) of one row's kRegs/2 values as a balanced tree: log2 depth instead of a kRegs/2-long dependency
  // chain, which sits on every iteration's critical path. [kFirst, kFirst + kCount): a range of the registers
  // (whole 8-column chunks, kCount a multiple of 4), e.g. one key half of an FP8 score tile (flash_fwd_fp8.cuh).
  template <bool kMax, int kFirst = 0, int kCount = kRegs>
  __device__ __forceinline__ static float row_reduce(const float (&s)[kRegs], int half) {
    static_assert(kFirst % 4 == 0 && kCount % 4 == 0 && kFirst + kCount <= kRegs, "whole 8-column chunks");
    constexpr int kN = kCount / 2;
    float v[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j] = s[kFirst + 4 * (j / 2) + 2 * half + (j % 2)];
#pragma unroll
    for (int width = 1; width < kN; width *= 2)
#pragma unroll
      for (int j = 0; j + width < kN; j += 2 * width) v[j] = kMax ? fmaxf(v[j], v[j + width]) : v[j] + v[j + width];
    return v[0];
  }

  // rescale_log2: how far (in log2 units of the scaled scores) a row's maximum may rise before it is moved. 0 moves it
  // on every rise (o_scale < 1 whenever it does). A positive value keeps a stale maximum while the new scores exceed
  // it by at most that much: the probabilities of the row are then up to 2^rescale_log2 instead of at most 1 (bf16
  // and fp16 keep the same relative precision; O and the row sums are fp32), O and the sums share that reference, and
  // finalize divides it out, so the result is the same softmax; o_scale stays exactly 1 and the warp skips the O
  // rescale (Consumer::rescale), which at head dim 256 is 128 FMULs per thread per key block.
  __device__ __forceinline__ void step(float (&s)[kRegs], float scale_log2, float rescale_log2, float (&o_scale)[2]) {
    float seen_max[2];
    if constexpr (kIntMax) {
#pragma unroll
      for (int r = 0; r < 2; ++r) seen_max[r] = quad_max(positive_row_max<kRegs, 0, kRegs>(s, r));
      if (__any_sync(0xffffffffu, !(seen_max[0] > 0.f) || !(seen_max[1] > 0.f))) {
#pragma unroll
        for (int r = 0; r < 2; ++r) seen_max[r] = quad_max(row_reduce<true>(s, r));
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) seen_max[r] = quad_max(row_reduce<true>(s, r));
    }
    float sub[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float seen = seen_max[r];
      // -inf - -inf is NaN (compares false): a row with nothing seen yet takes the tile's maximum.
      const bool move = row_max[r] == -INFINITY || (seen - row_max[r]) * scale_log2 > rescale_log2;
      const float new_max = move ? seen : row_max[r];
      sub[r] = scaled_max(new_max, scale_log2);
      // old max -inf -> 0 (nothing accumulated yet)
      o_scale[r] = move ? fast_exp2(row_max[r] * scale_log2 - sub[r]) : 1.f;
      row_max[r] = new_max;
    }
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i] = fast_exp2(fmaf(s[i], scale_log2, -sub[(i >> 1) & 1]));
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * o_scale[r] + row_reduce<false>(s, r);
  }

  // Per row: the factor that normalizes the output (0 for a row that attended nothing) and the natural-log lse
  // (-inf for such a row). sink: the head's attention sink (gpt-oss; fa3nn/sinks.py) in natural-log units of the
  // scaled scores, -inf for none: one more term exp(sink) in every row's sum that carries no value, so O shrinks by
  // sum / (sum + sink term) and lse includes it; a row that attended nothing keeps O = 0 and gets lse = the sink
  // (exactly, as store_empty writes it). The sum is taken against max(row max, sink) so that neither term overflows.
  __device__ __forceinline__ void finalize(float scale_log2, float sink, float (&inv_sum)[2], float (&lse)[2]) const {
    constexpr float kLn2 = 0.69314718055994530942f;
    const float sink_log2 = sink * 1.4426950408889634f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const bool empty = !(sum > 0.f);
      const float m = scaled_max(row_max[r], scale_log2);
      if (sink_log2 == -INFINITY) {  // (uniform over the CTA: one head per tile)
        inv_sum[r] = empty ? 0.f : 1.f / sum;
        lse[r] = empty ? -INFINITY : (m + __log2f(sum)) * kLn2;
      } else {
        const float top = fmaxf(m, sink_log2);
        const float row_part = sum * exp2f(m - top);  // the row's sum against `top`
        const float total = row_part + exp2f(sink_log2 - top);
        inv_sum[r] = empty ? 0.f : exp2f(m - top) / total;
        lse[r] = empty ? sink : (top + __log2f(total)) * kLn2;
      }
    }
  }
};

}  // namespace fa3nn::hopper
