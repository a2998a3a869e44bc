// FP8 (e4m3) warpgroup MMA: the K-major operand descriptors, the two attention GEMMs, and P's conversion from the
// fp32 accumulator to the e4m3 A-operand fragments. See HOPPER_PRIMER.md sections 1-3.
//
// FP8 wgmma (m64nNk32) has no transpose immediates: A and B are both K-major. S = Q8 K8^T reduces over headdim,
// which is contiguous in Q and K; O += P8 V8 reduces over keys, so V arrives transposed (Vt: head-dim rows of
// keys, written by the quantization pass). One k-step consumes 32 bytes of every row, as for bf16, so the k-advance
// inside a 128-B swizzled row is the same +32 B.
#pragma once
#include <cstdint>

#include "e4m3_exp2.cuh"
#include "wgmma.cuh"
#include "wgmma_fp8_ops.cuh"

namespace fa3nn::hopper {

// Descriptor of a K-major SW64 operand (rows of 64 B, 8-row atoms of 512 B): head dim 64 in e4m3 fills only half of
// a 128-B row, and TMA's 128B swizzle needs a 128-B box, so those tiles use the 64B swizzle on both sides.
__device__ __forceinline__ uint64_t make_desc_kmajor_sw64(uint32_t smem) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(1) << 16;          // LBO (unused for swizzled K-major)
  desc |= static_cast<uint64_t>(512 >> 4) << 32;   // SBO: 8 rows x 64 B
  desc |= static_cast<uint64_t>(2) << 62;          // 64B swizzle
  return desc;
}

// K-major descriptor for e4m3 rows of kRowBytes bytes (128: SW128, 64: SW64).
template <int kRowBytes>
__device__ __forceinline__ uint64_t make_desc_fp8_kmajor(uint32_t smem) {
  static_assert(kRowBytes == 128 || kRowBytes == 64, "fp8 tiles use 128-B or 64-B swizzled rows");
  if constexpr (kRowBytes == 128) return make_desc_kmajor_sw128(smem);
  else return make_desc_kmajor_sw64(smem);
}

// acc(64 x N) = A(64 x D) B(N x D)^T in e4m3: both K-major in D / kRowBytes panels of kRowBytes-byte rows,
// kAPanelBytes / kBPanelBytes apart; desc_a / desc_b describe the first k32 step of the first panel.
template <int N, int D, int kRowBytes, uint32_t kAPanelBytes, uint32_t kBPanelBytes>
__device__ __forceinline__ void gemm_fp8_ss(float (&acc)[N / 2], uint64_t desc_a, uint64_t desc_b) {
  constexpr int kStepsPerPanel = kRowBytes / 32;
#pragma unroll
  for (int k = 0; k < D / 32; ++k) {
    const uint32_t k_off = (k % kStepsPerPanel) * 32;
    const uint32_t panel = k / kStepsPerPanel;
    WgmmaFp8SS<N>::mma(acc, desc_advance(desc_a, panel * kAPanelBytes + k_off),
                       desc_advance(desc_b, panel * kBPanelBytes + k_off), k > 0 ? 1 : 0);
  }
}

// acc(64 x D) += P(64 x K) Vt(D x K)^T: P from registers (K/32 fragments of 4 regs), Vt in K-major panels of D rows
// x kPanelKeys bytes (128 keys: SW128, 64 keys: SW64), kPanelBytes apart; desc_vt describes the first k32 step.
// kOverwrite: acc = P Vt^T instead, a fresh per-block accumulator that the caller adds into fp32 O on the CUDA cores
// (flash_fwd_fp8.cuh, kPromote, says why). Its first k-step (scale_d = 0) declares acc output-only (WgmmaFp8RSSet),
// so acc's registers are free for other values before this call.
template <int K, int D, int kPanelKeys, uint32_t kPanelBytes, bool kOverwrite = false>
__device__ __forceinline__ void gemm_fp8_rs(float (&acc)[D / 2], const uint32_t (&p)[K / 32][4], uint64_t desc_vt) {
  static_assert(K % kPanelKeys == 0 && (kPanelKeys == 128 || kPanelKeys == 64), "Vt panels of 128 or 64 keys");
  constexpr int kStepsPerPanel = kPanelKeys / 32;
#pragma unroll
  for (int k = 0; k < K / 32; ++k) {
    const uint32_t offset = (k / kStepsPerPanel) * kPanelBytes + (k % kStepsPerPanel) * 32;
    if constexpr (kOverwrite) {  // (WgmmaFp8RSSet exists for the widths that need it only)
      if (k == 0) {
        WgmmaFp8RSSet<D>::mma(acc, p[k], desc_advance(desc_vt, offset));
        continue;
      }
    }
    WgmmaFp8RS<D>::mma(acc, p[k], desc_advance(desc_vt, offset), 1);
  }
}

// Two fp32 values -> two e4m3 bytes (round to nearest even, saturating), `lo` in the low byte.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  uint16_t packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(packed) : "f"(lo), "f"(hi));  // first source -> high byte
  return packed;
}

// The fp32 accumulator of a 64 x K tile (m64nK layout) -> the A fragments of K/32 m64nNk32 e4m3 wgmmas.
//
// Layouts, per 32-column slice and quad position q = lane % 4 (rows r0 and r1 = r0 + 8 of the quad are shared):
//   accumulator: thread q holds columns {2q, 2q+1, 8+2q, 9+2q} and {16+2q, 17+2q, 24+2q, 25+2q} of each row;
//   A fragment:  reg0 = (r0, k 4q..4q+3), reg1 = (r1, 4q..4q+3), reg2 = (r0, 16+4q..), reg3 = (r1, 16+4q..).
// Vt's keys are stored permuted inside every 16-key group (fa3nn/fp8/operands.py: key 2q + e at column 4q + e, key
// 8 + 2q + e at column 4q + 2 + e), so k position 4q + j of the fragment is key 2q + (j & 1) + 8 (j >> 1): the
// values thread q already holds. Each register packs four of them with two F2FP (no shuffle, no byte permute).
// The version for key-ordered Vt (two quad shuffles and two byte_perms per register pair, 16 SHFL + 32 PRMT per
// 128-key block and thread, on the path from the P V wait to the next GEMM issue) ran 7-16% slower at d128 on the
// H200 (benchmarks/NOTES.md "2026-12-01").
// kLinearEvery > 0: the registers linear_exp2_register picks hold linear-domain scores (e4m3_exp2.cuh), packed by
// e4m3x4_linear_exp2 instead.
template <int K, int kLinearEvery = 0>
__device__ __forceinline__ void p_to_fp8_fragments(const float (&p)[K / 2], uint32_t (&a)[K / 32][4]) {
#pragma unroll
  for (int kb = 0; kb < K / 32; ++kb) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // register j = h + 2 half: row h, keys 16 half.. of the slice
        const int i = 16 * kb + 2 * h + 8 * half;  // element e of 8-column chunk c at i + 4c + e
        const int j = h + 2 * half;
        if (linear_exp2_register<kLinearEvery>(kb, j))
          a[kb][j] = e4m3x4_linear_exp2(p[i], p[i + 1], p[i + 4], p[i + 5]);
        else
          a[kb][j] = e4m3x2(p[i], p[i + 1]) | (e4m3x2(p[i + 4], p[i + 5]) << 16);
      }
    }
  }
}

}  // namespace fa3nn::hopper
