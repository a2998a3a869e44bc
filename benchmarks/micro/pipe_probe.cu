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
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.cuh"
#include "probe_ops.cuh"

namespace probe {

// kOps: a mask of Op; each step issues 8 of each (independent registers).
template <int kOps>
__global__ void throughput(int steps, long long* clocks, float* sink) {
  __syncthreads();
  const long long t0 = clock64();
  const float acc = mix_steps<kOps>(steps);
  __syncthreads();
  const long long t1 = clock64();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

// The per-block softmax of softmax_fp8.cuh (probe_ops.cuh's softmax_blocks), `steps` blocks.
template <bool kMaxTree, bool kRowSum, bool kPack>
__global__ void softmax_block(int steps, long long* clocks, float* sink) {
  __syncthreads();
  const long long t0 = clock64();
  const float acc = softmax_blocks<kMaxTree, kRowSum, kPack>(steps);
  const long long t1 = clock64();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
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
