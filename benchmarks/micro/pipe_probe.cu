// Which Hopper pipes the FP8 softmax's instructions share, and how long one warp's softmax over a 256-key block
// takes on its own. Two parts, both timed with clock64 inside the kernel (one CTA per SM, the SM clock):
//
//   throughput: each thread issues independent copies (8 per step, asm volatile so none is dropped or merged) of
//     one instruction mix; printed as warp instructions per clock per SM partition (SMSP) for each mix. Two
//     instructions on one pipe take the sum of their times when mixed; on two pipes, the longer one's.
//   softmax: 1 or 2 warps per SMSP each run the FP8 kernel's per-block softmax (softmax_fp8.cuh's step: 2 rows
//     of 64 scores per thread, max tree + quad shuffles, FFMA, ex2, row sums, e4m3 pack) in a loop whose score
//     factor depends on the previous block's sums; printed as clocks per block per warp, with the parts cut.
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -use_fast_math -o build/pipe_probe \
//        benchmarks/micro/pipe_probe.cu
//   build/pipe_probe
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.cuh"

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

// kOps: a mask of Op; each step issues 8 of each (independent registers).
template <int kOps>
__global__ void throughput(int steps, long long* clocks, float* sink) {
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
  __syncthreads();
  const long long t0 = clock64();
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
  __syncthreads();
  const long long t1 = clock64();
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) acc += a[j] + b[j] + float(r[j] & 0xff) + float(h[j]);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

// The per-block softmax of softmax_fp8.cuh (2 rows x 64 scores per thread, 256-key blocks), on register scores.
// kMaxTree: the row max tree + quad shuffles (else each row's max is a loop-carried constant); kRowSum: the FADD
// row sums; kPack: the e4m3 packing (as asm volatile so it is not dropped).
template <bool kMaxTree, bool kRowSum, bool kPack>
__global__ void softmax_block(int steps, long long* clocks, float* sink) {
  float s[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) s[i] = 0.01f * float((threadIdx.x * 37 + i * 101) % 97) - 0.5f;
  float row_max[2] = {-1e30f, -1e30f}, row_sum[2] = {0.f, 0.f};
  float c = 1.4426950f;
  unsigned pack_acc = 0;
  __syncthreads();
  const long long t0 = clock64();
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
  const long long t1 = clock64();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = row_sum[0] + row_sum[1] + float(pack_acc & 0xff);
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

template <class Kernel>
double run_clocks(Kernel kernel, int sms, int threads, int steps, long long* d_clocks, float* d_sink) {
  kernel<<<sms, threads>>>(steps, d_clocks, d_sink);  // warm-up
  kernel<<<sms, threads>>>(steps, d_clocks, d_sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  static long long h[1024];
  CHECK(cudaMemcpy(h, d_clocks, sms * sizeof(long long), cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < sms; ++i) sum += double(h[i]);
  return sum / sms;
}

template <int kOps>
void report_throughput(const char* name, int n_kinds, int sms, long long* d_clocks, float* d_sink) {
  const int threads = 512, steps = 4096;  // 4 warps per SMSP
  const double clk = run_clocks(throughput<kOps>, sms, threads, steps, d_clocks, d_sink);
  // warp instructions per SMSP: (threads / 32 / 4) warps x steps x 8 per kind
  const double per_kind = double(threads / 32 / 4) * steps * 8;
  std::printf("throughput %-22s clocks %10.0f  warp-instr/clk/SMSP per kind %.3f  (all kinds %.3f)\n", name, clk,
              per_kind / clk, per_kind * n_kinds / clk);
}

template <bool kMaxTree, bool kRowSum, bool kPack>
void report_softmax(const char* name, int sms, long long* d_clocks, float* d_sink) {
  const int steps = 256;
  for (int warps_per_smsp : {1, 2}) {
    const double clk =
        run_clocks(softmax_block<kMaxTree, kRowSum, kPack>, sms, 128 * warps_per_smsp, steps, d_clocks, d_sink);
    std::printf("softmax %-28s warps/SMSP %d  clocks per 256-key block per warp-slot %7.1f  (per block %7.1f)\n",
                name, warps_per_smsp, clk / steps, clk / steps / warps_per_smsp);
  }
}

}  // namespace probe

int main() {
  using namespace probe;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  long long* d_clocks;
  float* d_sink;
  CHECK(cudaMalloc(&d_clocks, 1024 * sizeof(long long)));
  CHECK(cudaMalloc(&d_sink, 1024 * 1024 * sizeof(float)));
  report_throughput<kEx2>("ex2", 1, sms, d_clocks, d_sink);
  report_throughput<kEx2F16>("ex2.f16x2", 1, sms, d_clocks, d_sink);
  report_throughput<kMax>("max", 1, sms, d_clocks, d_sink);
  report_throughput<kFfma>("ffma", 1, sms, d_clocks, d_sink);
  report_throughput<kFadd>("fadd", 1, sms, d_clocks, d_sink);
  report_throughput<kPrmt>("prmt", 1, sms, d_clocks, d_sink);
  report_throughput<kIMax3>("imax3 (VIMNMX3)", 1, sms, d_clocks, d_sink);
  report_throughput<kIMax3 | kMax>("imax3+max", 2, sms, d_clocks, d_sink);
  report_throughput<kIMax3 | kFfma>("imax3+ffma", 2, sms, d_clocks, d_sink);
  report_throughput<kEx2 | kCvtE4m3>("ex2+cvt.e4m3x2", 2, sms, d_clocks, d_sink);
  report_throughput<kEx2 | kMax>("ex2+max", 2, sms, d_clocks, d_sink);
  report_throughput<kMax | kFfma>("max+ffma", 2, sms, d_clocks, d_sink);
  report_throughput<kMax | kPrmt>("max+prmt", 2, sms, d_clocks, d_sink);
  report_throughput<kCvtE4m3 | kMax>("cvt.e4m3x2+max", 2, sms, d_clocks, d_sink);
  report_throughput<kCvtE4m3 | kPrmt>("cvt.e4m3x2+prmt", 2, sms, d_clocks, d_sink);
  report_throughput<kFfma | kFadd>("ffma+fadd", 2, sms, d_clocks, d_sink);
  report_throughput<kEx2 | kFfma | kFadd | kMax>("ex2+ffma+fadd+max", 4, sms, d_clocks, d_sink);
  report_softmax<true, true, true>("full", sms, d_clocks, d_sink);
  report_softmax<false, true, true>("no max tree", sms, d_clocks, d_sink);
  report_softmax<true, false, true>("no row sum", sms, d_clocks, d_sink);
  report_softmax<true, true, false>("no e4m3 pack", sms, d_clocks, d_sink);
  report_softmax<false, false, false>("exp2 + FFMA only", sms, d_clocks, d_sink);
  return 0;
}
