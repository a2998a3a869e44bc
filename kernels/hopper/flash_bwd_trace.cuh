// FA3NN_BWD_TRACE (a measurement build only: python -m fa3nn.backends.hopper_build --define FA3NN_BWD_TRACE; never
// the library's default): the first consumer warpgroup's leader of CTAs 0 .. kBwdTraceCtas - 1 records
// %globaltimer (ns) at six points of each of its first kBwdTraceTiles tiles, so scripts/bwd_trace.py can say where
// a tile's time goes in the persistent backward (events: BwdTraceEvent). Every translation unit that instantiates the
// kernel has its own copy of the buffer (no relocatable device code); flash_bwd_d{64,128}.cu export a reader each.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace fa3nn::hopper {

enum BwdTraceEvent : int {
  kTraceTileStart = 0,  // top of the tile, before the K/V wait
  kTraceKVReady,        // K/V of the tile arrived
  kTraceFirstStage,     // the tile's first ring stage arrived
  kTraceLoopEnd,        // after the tile's last step (overlap: before the final dQ)
  kTraceKVFree,         // after the kv_free arrive (the last K read done)
  kTraceTileEnd,        // after the dK / dV stores were issued
  kTraceEvents
};
constexpr int kBwdTraceCtas = 132, kBwdTraceTiles = 16;

#ifdef FA3NN_BWD_TRACE
static __device__ unsigned long long g_bwd_trace[kBwdTraceCtas][kBwdTraceTiles][kTraceEvents];

__device__ __forceinline__ void bwd_trace(bool leader, int wg, int iter, BwdTraceEvent event) {
  if (leader && wg == 0 && blockIdx.x < kBwdTraceCtas && iter < kBwdTraceTiles) {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    g_bwd_trace[blockIdx.x][iter][event] = ns;
  }
}

// The buffer of this translation unit's kernels into `out` (kBwdTraceCtas * kBwdTraceTiles * kTraceEvents values),
// then zeroed; synchronizes the device.
static inline int read_bwd_trace(unsigned long long* out) {
  const size_t bytes = sizeof(g_bwd_trace);
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(out, g_bwd_trace, bytes) != cudaSuccess)
    return 1;
  static unsigned long long zeros[kBwdTraceCtas][kBwdTraceTiles][kTraceEvents];
  return cudaMemcpyToSymbol(g_bwd_trace, zeros, bytes) != cudaSuccess;
}
#else
__device__ __forceinline__ void bwd_trace(bool, int, int, BwdTraceEvent) {}
#endif

}  // namespace fa3nn::hopper
