// The instruction mixes of the microbenchmarks in this folder (pipe_probe.cu, gemm_beside.cu): single softmax
// instructions as asm volatile (so ptxas neither drops nor merges them), a step of 8 independent copies of a mix,
// and the FP8 forward's per-block softmax on register scores. Timing is the caller's (clock64 around these).
#pragma once
#include <cuda_runtime.h>

namespace probe {

enum Op : int { kEx2 = 1, kCvtE4m3 = 2, kMax = 4, kFfma = 8, kFadd = 16, kPrmt = 64, kEx2F16 = 128, kIMax3 = 256 };

__device__ __forceinline__ void op_ex2(float& a) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a)); }
__device__ __forceinline__ void op_cvt_e4m3(float a, float b, unsigned short& h) {
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(a), "f"(b));
}
__device__ __forceinline__ void op_max(float& a, float b) { asm volatile("max.f32 %0, %0, %1;" : "+f"(a) : "f"(b)); }
__device__ __forceinline__ void op_ffma(float& a, float b) {
  asm volatile("fma.rn.f32 %0, %0, %1, %1;" : "+f"(a) : "f"(b));
}
__device__ __forceinline__ void op_fadd(float& a, float b) { asm volatile("add.f32 %0, %0, %1;" : "+f"(a) : "f"(b)); }
__device__ __forceinline__ void op_prmt(unsigned& r, unsigned b) {
  asm volatile("prmt.b32 %0, %0, %1, 0x5140;" : "+r"(r) : "r"(b));
}
__device__ __forceinline__ void op_imax3(unsigned& r, unsigned b, unsigned c) {
  // two PTX maxes, which ptxas fuses into one 3-input VIMNMX3 (as __vimax3_s32 compiles)
  asm volatile("{.reg .s32 t;\nmax.s32 t, %0, %1;\nmax.s32 %0, t, %2;}" : "+r"(r) : "r"(b), "r"(c));
}
__device__ __forceinline__ void op_ex2_f16(unsigned& r) { asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(r)); }

// kOps (a mask of Op) for `steps` steps of 8 independent copies each; returns a value to sink.
template <int kOps>
__device__ __forceinline__ float mix_steps(int steps) {
  float a[8], b[8];
  unsigned r[8];
  unsigned short h[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    a[j] = -1.f - 0.01f * (threadIdx.x + j);
    b[j] = 0.5f + 0.001f * j;
    r[j] = threadIdx.x * 0x01010101u + j;
    h[j] = 0;
  }
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr ((kOps & kEx2) != 0) op_ex2(a[j]);
      if constexpr ((kOps & kCvtE4m3) != 0) op_cvt_e4m3(b[j], b[(j + 1) & 7], h[j]);
      if constexpr ((kOps & kMax) != 0) op_max(b[j], a[(j + 3) & 7]);
      if constexpr ((kOps & kFfma) != 0) op_ffma(b[(j + 4) & 7], b[j]);
      if constexpr ((kOps & kFadd) != 0) op_fadd(b[(j + 5) & 7], a[j]);
      if constexpr ((kOps & kPrmt) != 0) op_prmt(r[j], r[(j + 1) & 7]);
      if constexpr ((kOps & kEx2F16) != 0) op_ex2_f16(r[j]);
      if constexpr ((kOps & kIMax3) != 0) op_imax3(r[j], r[(j + 1) & 7], r[(j + 2) & 7]);
    }
  }
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) acc += a[j] + b[j] + float(r[j] & 0xff) + float(h[j]);
  return acc;
}

// The per-block softmax of softmax_fp8.cuh (2 rows x 64 scores per thread, 256-key blocks), on register scores,
// `steps` blocks; returns a value to sink. kMaxTree: the row max tree + quad shuffles (else each row's max is a
// loop-carried constant); kRowSum: the FADD row sums; kPack: the e4m3 packing (as asm volatile so it is not dropped).
template <bool kMaxTree, bool kRowSum, bool kPack>
__device__ __forceinline__ float softmax_blocks(int steps) {
  float s[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) s[i] = 0.01f * float((threadIdx.x * 37 + i * 101) % 97) - 0.5f;
  float row_max[2] = {-1e30f, -1e30f}, row_sum[2] = {0.f, 0.f};
  float c = 1.4426950f;
  unsigned pack_acc = 0;
  for (int step = 0; step < steps; ++step) {
    float sub[2], scale[2];
    // The first score of each tree chain depends on the previous block, so ptxas cannot hoist the max tree.
#pragma unroll
    for (int i = 0; i < 8; i += 2) s[i] = fmaf(c, 1e-30f, s[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = s[2 * r];
      if constexpr (kMaxTree) {
        float m0 = fmaxf(s[2 * r], s[2 * r + 1]), m1 = fmaxf(s[2 * r + 4], s[2 * r + 5]);
#pragma unroll
        for (int i = 8; i < 128; i += 8) {
          m0 = fmaxf(m0, fmaxf(s[i + 2 * r], s[i + 2 * r + 1]));
          m1 = fmaxf(m1, fmaxf(s[i + 4 + 2 * r], s[i + 4 + 2 * r + 1]));
        }
        m = fmaxf(m0, m1);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      }
      const float new_max = fmaxf(row_max[r], m * c);
      scale[r] = exp2f(row_max[r] - new_max);
      row_max[r] = new_max;
      sub[r] = new_max - 8.f;
    }
    float p[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) p[i] = exp2f(fmaf(s[i], c, -sub[(i >> 1) & 1]));
    if constexpr (kRowSum) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float t0s = 0.f, t1s = 0.f;
#pragma unroll
        for (int i = 0; i < 128; i += 4) {
          t0s += p[i + 2 * r];
          t1s += p[i + 2 * r + 1];
        }
        row_sum[r] = row_sum[r] * scale[r] + (t0s + t1s);
      }
    } else {
      row_sum[0] = row_sum[0] * scale[0] + p[0];
      row_sum[1] = row_sum[1] * scale[1] + p[127];
    }
    if constexpr (kPack) {
#pragma unroll
      for (int i = 0; i < 128; i += 2) {
        unsigned short h;
        asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(p[i + 1]), "f"(p[i]));
        pack_acc ^= h;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 128; i += 2) pack_acc ^= __float_as_uint(p[i]) + __float_as_uint(p[i + 1]);
    }
    c = 1.4426950f + 1e-30f * (row_sum[0] + row_sum[1]);  // the next block waits for this one's sums
  }
  return row_sum[0] + row_sum[1] + float(pack_acc & 0xff);
}

}  // namespace probe
