// The linear exp2: e4m3 probabilities straight from the exp2 argument by bit arithmetic, no MUFU. d128's 256-key
// FP8 kernel takes it on half its scores under the recipes' fast_exp2 (variant 53, flash_fwd_fp8_launch.cuh
// run_fp8_default; off by default: it costs accuracy, below), and on a quarter / half / all in benchmark variants
// 48-50.
//
// An e4m3 value's bit pattern k = 8 e + m (e: biased exponent, m: 3 mantissa bits) encodes 2^(e - 7) (1 + m / 8),
// so k = round(8 x + 56) is the pattern of 2^x with its mantissa interpolated linearly inside each octave
// (Schraudolph's exp at e4m3's width): 1 + f in place of 2^f, 0-6.1% above it. The bias 56 - 0.46 takes out the
// line's mean excess (4.07%: linear and MUFU scores of one row then weigh alike; uncentred, a quarter / half of the
// scores on the line put CPU emulation's outlier RMSE +0.8% / +1.8% over MUFU at 2k, centred +0.15% / +0.3%) and
// still rounds x = 8 (the row max) to 256 exactly. Per four scores: two F2FP (fp32 -> f16x2 with relu), two HADD2
// (+1024 rounds each half to an integer: its f16 bits are then 0x6400 + k), one PRMT (the low bytes), where MUFU
// takes four MUFU and two F2FP; beside the other warpgroup's GEMMs a MUFU costs ~5x an FP32 instruction's issue
// (benchmarks/NOTES.md s21a).
// Measured (H200, s23a-s23c): +4..+8% / +10..+16% / +15..+20% kernel-only at 2k-16k keys non-causal for a quarter /
// half / all of the scores, at +1.2% / +2.4% / +4.7% output error against fp64 on N(0, 1) inputs (5.26e-2 -> 5.32 /
// 5.38 / 5.50e-2 at 4k: P8 / P spreads 3.2% rms where rounding the exact exp2 spreads 2.65%); on
// FlashAttention-3's outlier inputs per-tile + incoherent RMSE 9.10e-3 -> 9.16 / 9.30 / 9.82e-3 at 8k keys
// (scripts/fp8_accuracy.py --linear-exp2). Below x = -6 the patterns are e4m3's subnormals (k / 512), which the
// octave line undershoots (0 instead of 4 at x = -7): on
// FlashAttention-3's outlier inputs, whose scores reach there, that is most of the line's cost (4k, every score on
// the line: +2.9% RMSE, +0.2% with the subnormals rounded exactly). A second line max(y, 3 y / 8 + 5, 0) fixes it
// for two more f16x2 instructions per pair: measured slower than the plain line on half the scores (s23b).
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

// y = kLinearScale * x + kLinearBias for an exp2 argument x (at most 8: FlashAttention-3's max offset) is k before
// rounding; y <= 120 here, inside e4m3's largest finite pattern 126 (448), while the row max in log2 units stays
// far below 2^23 (x's fp32 rounding grows with it; nothing saturates on this path, unlike MUFU's satfinite cast:
// scaled scores of ~10^6 and more could reach the NaN pattern 127).
constexpr float kLinearScale = 8.f, kLinearBias = 56.f - 0.46f;  // fa3nn/fp8/reference.py LINEAR_BIAS

// Whether P fragment register a[kb][j] of p_to_fp8_fragments (wgmma_fp8.cuh; j = row + 2 * key half of the
// 32-key slice kb) takes the linear exp2: every kLinearEvery-th of the walk (kb + j), so both of a thread's rows get
// the same share (0: none). In a block's coordinates (fa3nn/fp8/reference.py linear_exp2_columns): query row r (of
// the tile), key c: kb = c / 32, j = (r % 16 >= 8) + 2 (c % 32 >= 16).
template <int kLinearEvery>
__host__ __device__ constexpr bool linear_exp2_register(int kb, int j) {
  return kLinearEvery > 0 && (kb + j) % kLinearEvery == kLinearEvery - 1;
}

// Score register i of an m64nK fp32 accumulator belongs to P fragment register a[i / 16][fragment_slot(i)]:
// i = 16 kb + w, j = ((w >> 1) & 1) + 2 (w >= 8).
__host__ __device__ constexpr int fragment_slot(int i) { return ((i >> 1) & 1) + (i % 16 >= 8 ? 2 : 0); }

// Two linear-domain scores y (-inf for a masked key) -> their patterns k = round(max(y, 0)) in the low byte of each
// f16 half (1024 + k: f16's step is 1 there; rounded twice, to f16 then to an integer).
__device__ __forceinline__ uint32_t e4m3x2_linear_exp2_f16(float y0, float y1) {
  uint32_t h;
  asm("cvt.rn.relu.f16x2.f32 %0, %2, %1;" : "=r"(h) : "f"(y0), "f"(y1));  // first source -> high half
  asm("add.rn.f16x2 %0, %0, %1;" : "+r"(h) : "r"(0x64006400u));           // + 1024 rounds each half to an integer
  return h;
}

// Four linear-domain scores -> four e4m3 bytes, y0 in the low byte.
__device__ __forceinline__ uint32_t e4m3x4_linear_exp2(float y0, float y1, float y2, float y3) {
  const uint32_t lo = e4m3x2_linear_exp2_f16(y0, y1);
  const uint32_t hi = e4m3x2_linear_exp2_f16(y2, y3);
  uint32_t packed;
  asm("prmt.b32 %0, %1, %2, 0x6420;" : "=r"(packed) : "r"(lo), "r"(hi));  // the low byte of each half
  return packed;
}

}  // namespace fa3nn::hopper
