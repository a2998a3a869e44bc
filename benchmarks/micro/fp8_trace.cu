// A timeline of the real FP8 d128 forward (variant 0 = the default: with these K/V tiles the 256-key split-S fused
// turn with its row sums from the P V GEMM, its turns chained across tile ends, O stored by TMA (the per-block trace
// covers the first tile's key loop; the tile trace every tile of CTA 0); any other variant by number): the kernel
// built with
// FA3NN_FP8_TRACE records clock64 at each step of CTA 0's first tile (flash_fwd_fp8.cuh, g_fp8_trace), per consumer
// warp (lane 0), and this prints how long each phase took, averaged over the tile's steady blocks (per warpgroup as
// its warp 0 saw it, then per warp, then each event's spread across a warpgroup's warps), with the kernel's
// own TFLOP/s with the trace compiled in (built without FA3NN_FP8_TRACE it prints the TFLOP/s alone, to see what
// the clock reads cost).
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DFA3NN_HANG_GUARD -DFA3NN_FP8_TRACE \
//        -I kernels/hopper \
//        -o build/fp8_trace benchmarks/micro/fp8_trace.cu && build/fp8_trace [seqlen] [causal] [variant] [wide]
//
// Inputs: random e4m3 of magnitude 2^-3..2^0 (as fp8_chain.cu), descales 1 (or with wide = 1: 2^1..2^8, descales
// 2^-7, scores of about unit spread as per-tile quantized randn gives), block_q 128, block_k 768 (serves the
// 128-, 192- and 256-key kernels), bf16 out; batch x seqlen = 16384 tokens, 16 heads (the FlashAttention-3 paper's
// d128 shapes). With 256-key blocks (variants 30, 31) the K stage wait sits inside the turn (kKWaitInTurn), so the
// "K/V wait" phase is V's alone and K's lands in "Q K^T issue". Variant 35 (fused_turn_w3) has three consumer
// warpgroups: all three are recorded and printed (its tile is 192 query rows).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.cuh"
#include <vector>

#include "flash_fwd_fp8_launch.cuh"

namespace fa3nn::hopper::host {
int fail(const char* fmt, const char* detail) {
  std::fprintf(stderr, "fa3nn: ");
  std::fprintf(stderr, fmt, detail);
  std::fprintf(stderr, "\n");
  return 1;
}
}  // namespace fa3nn::hopper::host

namespace trace_harness {

// Random signs; magnitudes 2^-3..2^0 (the default), or with `wide` 2^1..2^8 (bytes 0x40-0x77, never the NaN 0x7f),
// which with descales of 2^-7 give scores of about unit spread, as per-tile quantized randn inputs do.
__global__ void fill_e4m3(uint8_t* p, size_t n, uint32_t seed, bool wide) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B9u + seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const uint32_t magnitude = wide ? 0x40 + (h >> 24) % 0x38 : 0x28 + ((h >> 24) & 0x0F);
    p[i] = static_cast<uint8_t>(magnitude) | ((h >> 16) & 0x80);
  }
}

__global__ void fill_f32(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}


}  // namespace trace_harness

using namespace fa3nn::hopper;
using namespace fa3nn::hopper::host;
using namespace trace_harness;

// Variants 100-102 (this harness only): the default with its exp2s / row max tree / whole softmax cut (WRONG
// outputs; Fp8Experiment kFusedTurnCut*, flash_fwd_fp8.cuh). Others: run_fp8_headdim's variants.
int run(const Fp8Problem& pr, int variant) {
  switch (variant) {
    case 100: return run_fp8_tiles<128, 0, true, 4, kFusedTurnCutExp2, 192, true>(pr);
    case 101: return run_fp8_tiles<128, 0, true, 4, kFusedTurnCutRowMax, 192, true>(pr);
    case 102: return run_fp8_tiles<128, 0, true, 4, kFusedTurnSkipSoftmax, 192, true>(pr);
    default: return run_fp8_headdim<128>(pr, variant);
  }
}

int main(int argc, char** argv) {
  const int seqlen = argc > 1 ? std::atoi(argv[1]) : 16384;
  const bool causal = argc > 2 && std::atoi(argv[2]) != 0;
  const int variant = argc > 3 ? std::atoi(argv[3]) : 0;  // flash_fwd_fp8_launch.cuh's FP8 variants (bf16 out)
  const bool wide = argc > 4 && std::atoi(argv[4]) != 0;  // fill_e4m3's wide inputs, descales 2^-7
  const int d = 128, nheads = 2048 / d, batch = 16384 / seqlen, block_q = 128, block_k = 768;
  const size_t rows = size_t(batch) * seqlen;
  uint8_t *q8, *k8, *vt8;
  void* out;
  float *lse, *qd, *kd, *vd;
  const int q_tiles = (seqlen + block_q - 1) / block_q, k_tiles = (seqlen + block_k - 1) / block_k;
  CHECK(cudaMalloc(&q8, rows * nheads * d));
  CHECK(cudaMalloc(&k8, rows * nheads * d));
  CHECK(cudaMalloc(&vt8, rows * nheads * d));
  CHECK(cudaMalloc(&out, rows * nheads * d * 2));
  CHECK(cudaMalloc(&lse, rows * nheads * 4));
  CHECK(cudaMalloc(&qd, size_t(batch) * nheads * q_tiles * 4));
  CHECK(cudaMalloc(&kd, size_t(batch) * nheads * k_tiles * 4));
  CHECK(cudaMalloc(&vd, size_t(batch) * nheads * k_tiles * 4));
  fill_e4m3<<<1024, 256>>>(q8, rows * nheads * d, 1, wide);
  fill_e4m3<<<1024, 256>>>(k8, rows * nheads * d, 2, wide);
  fill_e4m3<<<1024, 256>>>(vt8, rows * nheads * d, 3, wide);
  const float descale = wide ? 1.f / 128 : 1.f;
  fill_f32<<<64, 256>>>(qd, size_t(batch) * nheads * q_tiles, descale);
  fill_f32<<<64, 256>>>(kd, size_t(batch) * nheads * k_tiles, descale);
  fill_f32<<<64, 256>>>(vd, size_t(batch) * nheads * k_tiles, descale);
  CHECK(cudaDeviceSynchronize());

  // Element strides (batch, row, head) for q8, k8; (batch, head, d row) for vt8; (batch, row, head) for out.
  const int64_t hd = int64_t(nheads) * d;
  const int64_t strides[12] = {seqlen * hd, hd, d, seqlen * hd, hd, d,
                               int64_t(nheads) * d * seqlen, int64_t(d) * seqlen, seqlen, seqlen * hd, hd, d};
  const int64_t descale_strides[6] = {int64_t(nheads) * q_tiles, q_tiles, int64_t(nheads) * k_tiles, k_tiles,
                                      int64_t(nheads) * k_tiles, k_tiles};
  const Fp8Problem pr{q8, k8, vt8, out, lse, nullptr, nullptr, nullptr, qd, kd, vd, batch, seqlen, seqlen, seqlen,
                      seqlen, seqlen, nheads, nheads, d, strides, descale_strides, block_q, block_k,
                      1.f / std::sqrt(float(d)), true, causal, nullptr};

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  if (run(pr, variant)) return 1;  // warm-up
  CHECK(cudaDeviceSynchronize());
  const int iters = 20;
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) run(pr, variant);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  ms /= iters;
  const double flops = 4.0 * batch * nheads * double(seqlen) * seqlen * d / (causal ? 2 : 1);
#ifdef FA3NN_FP8_TRACE
  const char* build = "trace compiled in";
#else
  const char* build = "without the trace";
#endif
  std::printf("d128 seqlen %d %s variant %d%s: %.3f ms, %.1f TFLOP/s (%s)\n", seqlen,
              causal ? "causal" : "non-causal", variant, wide ? " wide inputs" : "", ms, flops / ms / 1e9, build);
#ifdef FA3NN_FP8_TRACE

  std::vector<long long> trace(kFp8TraceWarpgroups * kFp8TraceWarps * kFp8TraceBlocks * kFp8TraceEvents);
  CHECK(cudaMemcpyFromSymbol(trace.data(), g_fp8_trace, trace.size() * sizeof(long long)));
  auto at_warp = [&](int wg, int warp, int n, int e) {
    return trace[((size_t(wg) * kFp8TraceWarps + warp) * kFp8TraceBlocks + n) * kFp8TraceEvents + e];
  };
  auto at = [&](int wg, int n, int e) { return at_warp(wg, 0, n, e); };
  int n_blocks = 1;  // the traced tile's key blocks: those whose last event was recorded (any key block size)
  while (n_blocks < kFp8TraceBlocks && at(0, n_blocks, 7) != 0) ++n_blocks;
  // consumer warpgroups that recorded (three for variant 35, fused_turn_w3)
  const int wgs = at(2, 0, 5) != 0 ? 3 : 2;
  const long long t0 = std::min(at(0, 0, 5), at(1, 0, 5));
  std::printf("raw (clocks from warpgroup 0's first S), warp 0, blocks 20-23: "
              "wg block: top kv turn pv qk | S softmax P\n");
  for (int n = 20; n < std::min(24, n_blocks); ++n)
    for (int wg = 0; wg < wgs; ++wg) {
      std::printf("  %d %3d:", wg, n);
      for (int e = 0; e < kFp8TraceEvents; ++e) std::printf(" %8lld", at(wg, n, e) - t0);
      std::printf("\n");
    }
  // Phases, averaged over blocks 8 .. n_blocks - 2 (steady state), per warpgroup (its warp 0), then per warp.
  const char* names[] = {"K/V wait", "turn wait", "P V + promote", "Q K^T issue", "S wait", "softmax",
                         "P + factor", "to next top", "period"};
  auto phases = [&](int wg, int warp) {
    double sum[9] = {}, k_wait = 0;
    int count = 0;
    for (int n = 8; n < n_blocks - 1; ++n, ++count) {
      for (int e = 0; e < 7; ++e) sum[e] += double(at_warp(wg, warp, n, e + 1) - at_warp(wg, warp, n, e));
      sum[7] += double(at_warp(wg, warp, n + 1, 0) - at_warp(wg, warp, n, 7));
      sum[8] += double(at_warp(wg, warp, n + 1, 0) - at_warp(wg, warp, n, 0));
      // the "Q K^T issue" phase in two: the K stage wait inside the turn (kKWaitInTurn), then the GEMM issue
      k_wait += double(at_warp(wg, warp, n, 8) - at_warp(wg, warp, n, 3));
    }
    for (int e = 0; e < 9; ++e) std::printf(" %s %.0f |", names[e], sum[e] / count);
    std::printf(" (of Q K^T issue: K wait %.0f)\n", k_wait / count);
  };
  std::printf("phase clocks per block (mean over blocks 8..%d):\n", n_blocks - 2);
  for (int wg = 0; wg < wgs; ++wg) {
    std::printf("  wg %d:", wg);
    phases(wg, 0);
  }
  std::printf("per warp (warp 0 as above):\n");
  for (int wg = 0; wg < wgs; ++wg)
    for (int warp = 0; warp < kFp8TraceWarps; ++warp) {
      std::printf("  wg %d warp %d:", wg, warp);
      phases(wg, warp);
    }
  // Each event's spread across a warpgroup's four warps (latest minus earliest lane-0 clock), mean over the blocks.
  std::printf("spread across warps (latest - earliest), mean per event: top kv turn pv qk S softmax P kwait\n");
  for (int wg = 0; wg < wgs; ++wg) {
    std::printf("  wg %d:", wg);
    for (int e = 0; e < kFp8TraceEvents; ++e) {
      double spread = 0;
      int count = 0;
      for (int n = 8; n < n_blocks - 1; ++n, ++count) {
        long long lo = at_warp(wg, 0, n, e), hi = lo;
        for (int warp = 1; warp < kFp8TraceWarps; ++warp) {
          lo = std::min(lo, at_warp(wg, warp, n, e));
          hi = std::max(hi, at_warp(wg, warp, n, e));
        }
        spread += double(hi - lo);
      }
      std::printf(" %.0f", spread / count);
    }
    std::printf("\n");
  }
  // The cross-tile chain's tiles in CTA 0 (g_fp8_tile_trace): each tile's clocks from its first Q K^T issue to the
  // next tile's, and a least-squares fit clocks = a + b * key blocks over them: a is what a tile costs beyond its
  // blocks (the turn at its end, the first and the diagonal block's extra), b a block's steady period.
  std::vector<long long> tiles(kFp8TraceWarpgroups * kFp8TraceTiles * 3);
  CHECK(cudaMemcpyFromSymbol(tiles.data(), g_fp8_tile_trace, tiles.size() * sizeof(long long)));
  auto tile_at = [&](int wg, int i, int f) { return tiles[(size_t(wg) * kFp8TraceTiles + i) * 3 + f]; };
  for (int wg = 0; wg < 2; ++wg) {
    int count = 0;
    while (count < kFp8TraceTiles && tile_at(wg, count, 0) != 0 && tile_at(wg, count, 1) >= 0) ++count;
    const bool ended = count < kFp8TraceTiles && tile_at(wg, count, 0) != 0;  // the end entry was recorded
    const int timed = ended ? count : count - 1;
    if (timed < 2) continue;
    double sn = 0, st = 0, snn = 0, snt = 0;
    std::printf("CTA 0 tiles, warpgroup %d (m_block: key blocks -> clocks):", wg);
    for (int i = 0; i < timed; ++i) {
      const double n = double(tile_at(wg, i, 1)), t = double(tile_at(wg, i + 1, 0) - tile_at(wg, i, 0));
      std::printf(" %lld:%lld->%.0f", tile_at(wg, i, 2), tile_at(wg, i, 1), t);
      sn += n, st += t, snn += n * n, snt += n * t;
    }
    const double b = (timed * snt - sn * st) / (timed * snn - sn * sn), a = (st - b * sn) / timed;
    std::printf("\n  fit over %d tiles: clocks = %.0f + %.0f * blocks (a tile's extra = %.2f blocks); %.0f clocks in "
                "all, %.0f key blocks\n", timed, a, b, a / b, st, sn);
  }
  // The turn at each tile's end (g_fp8_turn_trace, recorded at the index of the tile that follows it), mean clocks
  // per phase over CTA 0's tile ends.
  std::vector<long long> turns(kFp8TraceWarpgroups * kFp8TraceTiles * kFp8TraceTurnEvents);
  CHECK(cudaMemcpyFromSymbol(turns.data(), g_fp8_turn_trace, turns.size() * sizeof(long long)));
  auto turn_at = [&](int wg, int i, int e) { return turns[(size_t(wg) * kFp8TraceTiles + i) * kFp8TraceTurnEvents + e]; };
  const char* turn_names[] = {"find + descales", "V wait", "turn wait", "last P V + promote", "finalize + store",
                              "Q/K wait + reset", "to Q K^T issue"};
  for (int wg = 0; wg < 2; ++wg) {
    double sum[8] = {};
    int count = 0;
    for (int i = 1; i < kFp8TraceTiles && turn_at(wg, i, 6) != 0 && tile_at(wg, i, 0) != 0; ++i, ++count) {
      for (int e = 0; e < 6; ++e) sum[e] += double(turn_at(wg, i, e + 1) - turn_at(wg, i, e));
      sum[6] += double(tile_at(wg, i, 0) - turn_at(wg, i, 6));
      sum[7] += double(tile_at(wg, i, 0) - turn_at(wg, i, 0));
    }
    if (count == 0) continue;
    std::printf("tile-end turn, warpgroup %d, mean clocks over %d tile ends:", wg, count);
    for (int e = 0; e < 7; ++e) std::printf(" %s %.0f |", turn_names[e], sum[e] / count);
    std::printf(" whole %.0f\n", sum[7] / count);
  }
#endif
  return 0;
}
