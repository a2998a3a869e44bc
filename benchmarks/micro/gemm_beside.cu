// Does a warpgroup's FP8 wgmma slow the CUDA-core instructions of another warpgroup on the same SM, and which ones?
// The FP8 d128 forward's trace (NOTES, s20a) has a softmax take ~1260 clocks with only the other warpgroup's P V
// beside it and ~2050-2090 with its P V and Q K^T beside it; this isolates that on one SM.
//
// One CTA per SM (116 KB of shared memory, so no second one fits), 8 warps: warpgroup 0 issues FP8 wgmma chains
// on valid descriptors (e4m3 bytes of a fixed pattern, no NaN), warpgroup 1 (one warp per SMSP)
// runs one instruction mix from probe_ops.cuh, both timed with clock64 on the SM. Chains:
//   ss:   S = Q K^T of the d128 256-key kernel: 4 x m64n256k32, A and B from shared memory
//   rs:   O = P Vt^T: 8 x m64n128k32, A (P) from registers
//   both: ss then rs in one commit group
// each followed by commit + wait 0 (the kernel also waits for each chain). Per (chain, mix): the mix's clocks
// beside the chain over its clocks alone, the chain's FLOP per clock per SM, and whether the GEMM window covered
// the mix's (it must: the GEMM warpgroup runs a host-chosen number of chains, 2.5x the mix's time alone).
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -use_fast_math -I kernels/hopper \
//        -o build/gemm_beside benchmarks/micro/gemm_beside.cu
//   build/gemm_beside
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <type_traits>

#include "cuda_check.cuh"
#include "probe_ops.cuh"
#include "wgmma_fp8.cuh"

namespace probe {

using namespace fa3nn::hopper;

enum Chain : int { kNone = 0, kSS = 1, kRS = 2, kBoth = 3 };
enum Mix : int {
  kIdle = 0, kSoftmax = 1, kSoftmaxNoSum, kMixEx2, kMixFfma, kMixFadd, kMixCvt, kMixIMax3, kMixMax, kMixAll
};

constexpr uint32_t kQBytes = 64 * 128;        // 64 rows x d128 e4m3, SW128
constexpr uint32_t kKBytes = 256 * 128;       // 256 keys x d128
constexpr uint32_t kVtPanelBytes = 128 * 128;  // 128 head-dim rows x 128 keys, SW128; two panels
constexpr uint32_t kUsedBytes = kQBytes + kKBytes + 2 * kVtPanelBytes;
constexpr uint32_t kSmemBytes = 116 * 1024;   // > half of the SM's 228 KB: one CTA per SM
static_assert(kUsedBytes + 1024 <= kSmemBytes, "tiles fit");
constexpr double kChainFlops[4] = {0, 64.0 * 256 * 128 * 2, 64.0 * 128 * 256 * 2, 2 * 64.0 * 256 * 128 * 2};

template <int kMix>
__device__ __forceinline__ float run_mix(int steps) {
  if constexpr (kMix == kSoftmax) return softmax_blocks<true, true, true>(steps);
  else if constexpr (kMix == kSoftmaxNoSum) return softmax_blocks<true, false, true>(steps);
  else if constexpr (kMix == kMixEx2) return mix_steps<kEx2>(steps);
  else if constexpr (kMix == kMixFfma) return mix_steps<kFfma>(steps);
  else if constexpr (kMix == kMixFadd) return mix_steps<kFadd>(steps);
  else if constexpr (kMix == kMixCvt) return mix_steps<kCvtE4m3>(steps);
  else if constexpr (kMix == kMixIMax3) return mix_steps<kIMax3>(steps);
  else if constexpr (kMix == kMixMax) return mix_steps<kMax>(steps);
  else if constexpr (kMix == kMixAll) return mix_steps<kEx2 | kFfma | kFadd | kMax>(steps);
  else return 0.f;
}

// out[sm * 6 + {0..5}] = mix clocks, GEMM clocks, GEMM start, GEMM end, mix start, mix end (the SM's clock64).
template <int kChain, int kMix>
__global__ void __launch_bounds__(256, 1) beside(int mix_steps, int chains, long long* out, float* sink) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  for (uint32_t i = threadIdx.x * 4; i < kUsedBytes; i += blockDim.x * 4) {
    // e4m3 bytes with exponent fields 0..6 (never 0x7f / 0xff, the NaNs)
    const uint32_t h = (i * 2654435761u) >> 8;
    *reinterpret_cast<uint32_t*>(smem + i) = h & 0x37373737u;
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic-proxy writes -> the wgmma's reads
  __syncthreads();
  long long* o = out + blockIdx.x * 6;
  float acc = 0.f;
  if (threadIdx.x < 128) {
    if constexpr (kChain != kNone) {
      const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
      const uint64_t desc_q = make_desc_kmajor_sw128(base);
      const uint64_t desc_k = make_desc_kmajor_sw128(base + kQBytes);
      const uint64_t desc_vt = make_desc_kmajor_sw128(base + kQBytes + kKBytes);
      float s[128], acc_o[64];
      uint32_t p[8][4];
#pragma unroll
      for (int i = 0; i < 128; ++i) s[i] = 0.f;
#pragma unroll
      for (int i = 0; i < 64; ++i) acc_o[i] = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) p[k][j] = (threadIdx.x * 0x01010101u + k * 4 + j) & 0x37373737u;
      const long long t0 = clock64();
      for (int c = 0; c < chains; ++c) {
#pragma unroll
        for (int k = 0; k < 8; ++k) fence_operands(p[k]);
        warpgroup_arrive();
        // S accumulates across chains (scale_d 1): with the kernel's scale_d 0 on the first k-step ptxas drops
        // every chain whose S is overwritten unread (it did: 3 of 4 unrolled chains became dummy HGMMAs).
        if constexpr ((kChain & kSS) != 0) {
#pragma unroll
          for (int k = 0; k < 4; ++k)
            WgmmaFp8SS<256>::mma(s, desc_advance(desc_q, k * 32), desc_advance(desc_k, k * 32), 1);
        }
        if constexpr ((kChain & kRS) != 0) gemm_fp8_rs<256, 128, 128, kVtPanelBytes>(acc_o, p, desc_vt);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(s);
        fence_operands(acc_o);
      }
      const long long t1 = clock64();
#pragma unroll
      for (int i = 0; i < 128; ++i) acc += s[i];
#pragma unroll
      for (int i = 0; i < 64; ++i) acc += acc_o[i];
      if (threadIdx.x == 0) {
        o[1] = t1 - t0;
        o[2] = t0;
        o[3] = t1;
      }
    }
  } else {
    const long long t0 = clock64();
    acc = run_mix<kMix>(mix_steps);
    const long long t1 = clock64();
    if (threadIdx.x == 128) {
      o[0] = t1 - t0;
      o[4] = t0;
      o[5] = t1;
    }
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

struct Result {
  double mix_clocks, gemm_clocks, lead, tail;
};

template <int kChain, int kMix>
Result run(int sms, int mix_steps, int chains, long long* d_out, float* d_sink) {
  auto kernel = beside<kChain, kMix>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CHECK(cudaMemset(d_out, 0, sms * 6 * sizeof(long long)));
  for (int rep = 0; rep < 2; ++rep) kernel<<<sms, 256, kSmemBytes>>>(mix_steps, chains, d_out, d_sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  static long long h[6 * 1024];
  CHECK(cudaMemcpy(h, d_out, sms * 6 * sizeof(long long), cudaMemcpyDeviceToHost));
  // lead / tail: the smallest over SMs of (mix start - GEMM start) and (GEMM end - mix end); both must be >= 0.
  Result r{0, 0, 1e30, 1e30};
  for (int i = 0; i < sms; ++i) {
    const long long* x = h + 6 * i;
    r.mix_clocks += double(x[0]) / sms;
    r.gemm_clocks += double(x[1]) / sms;
    if (kChain != kNone && kMix != kIdle) {
      r.lead = std::min(r.lead, double(x[4] - x[2]));
      r.tail = std::min(r.tail, double(x[3] - x[5]));
    }
  }
  return r;
}

// The mix alone (which also sizes each GEMM window: 2.5x its time, in chains of the clocks measured per chain in
// chain_clocks), then beside each chain.
template <int kMix>
void report(const char* name, int sms, int mix_steps, const double (&chain_clocks)[4], long long* d_out,
            float* d_sink) {
  const Result alone = run<kNone, kMix>(sms, mix_steps, 0, d_out, d_sink);
  auto chains = [&](int chain) { return static_cast<int>(2.5 * alone.mix_clocks / chain_clocks[chain]) + 8; };
  const Result ss = run<kSS, kMix>(sms, mix_steps, chains(kSS), d_out, d_sink);
  const Result rs = run<kRS, kMix>(sms, mix_steps, chains(kRS), d_out, d_sink);
  const Result both = run<kBoth, kMix>(sms, mix_steps, chains(kBoth), d_out, d_sink);
  auto rate = [&](const Result& r, int chain) { return kChainFlops[chain] * chains(chain) / r.gemm_clocks; };
  std::printf(
      "%-12s alone %9.0f clk | beside ss x%.3f (gemm %5.0f FLOP/clk, lead %6.0f tail %6.0f) | rs x%.3f (%5.0f, %6.0f "
      "%6.0f) | both x%.3f (%5.0f, %6.0f %6.0f)\n",
      name, alone.mix_clocks, ss.mix_clocks / alone.mix_clocks, rate(ss, kSS), ss.lead, ss.tail,
      rs.mix_clocks / alone.mix_clocks, rate(rs, kRS), rs.lead, rs.tail,
      both.mix_clocks / alone.mix_clocks, rate(both, kBoth), both.lead, both.tail);
}

}  // namespace probe

int main() {
  using namespace probe;
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  long long* d_out;
  float* d_sink;
  CHECK(cudaMalloc(&d_out, 6 * 1024 * sizeof(long long)));
  CHECK(cudaMalloc(&d_sink, 1024 * 1024 * sizeof(float)));
  // The GEMMs alone: clocks per chain, to size each run's GEMM window at 2.5x the mix's time alone.
  const int probe_chains = 2000;
  double chain_clocks[4] = {0, 0, 0, 0};  // indexed by Chain
  chain_clocks[kSS] = run<kSS, kIdle>(sms, 0, probe_chains, d_out, d_sink).gemm_clocks / probe_chains;
  chain_clocks[kRS] = run<kRS, kIdle>(sms, 0, probe_chains, d_out, d_sink).gemm_clocks / probe_chains;
  chain_clocks[kBoth] = run<kBoth, kIdle>(sms, 0, probe_chains, d_out, d_sink).gemm_clocks / probe_chains;
  std::printf("GEMMs alone, clocks per chain (FLOP/clk/SM): ss %.0f (%.0f), rs %.0f (%.0f), both %.0f (%.0f)\n",
              chain_clocks[kSS], kChainFlops[kSS] / chain_clocks[kSS], chain_clocks[kRS],
              kChainFlops[kRS] / chain_clocks[kRS], chain_clocks[kBoth], kChainFlops[kBoth] / chain_clocks[kBoth]);
  auto go = [&](auto mix_tag, const char* name, int steps) {
    report<decltype(mix_tag)::value>(name, sms, steps, chain_clocks, d_out, d_sink);
  };
  go(std::integral_constant<int, kSoftmax>{}, "softmax", 128);
  go(std::integral_constant<int, kSoftmaxNoSum>{}, "softmax, no row sum", 128);
  go(std::integral_constant<int, kMixEx2>{}, "ex2", 1024);
  go(std::integral_constant<int, kMixFfma>{}, "ffma", 8192);
  go(std::integral_constant<int, kMixFadd>{}, "fadd", 8192);
  go(std::integral_constant<int, kMixMax>{}, "fmnmx", 4096);
  go(std::integral_constant<int, kMixIMax3>{}, "imax3", 4096);
  go(std::integral_constant<int, kMixCvt>{}, "cvt.e4m3x2", 4096);
  go(std::integral_constant<int, kMixAll>{}, "ex2+ffma+fadd+max", 1024);
  return 0;
}
