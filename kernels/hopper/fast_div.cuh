// Division of a non-negative int below 2^31 by a divisor fixed for the whole launch, as one multiply-high, an add
// and a shift instead of the ~25-instruction sequence nvcc emits for a runtime int division (IABS, I2F.RP,
// MUFU.RCP, F2I, IMADs and fix-ups). The persistent scheduler divides tile indices by launch-wide counts every tile;
// ncu of the d64 causal 512 forward counted ~150k such divisions per call, ~6% of its instructions
// (benchmarks/NOTES.md, 2026-12-01 fifth session).
//
// Method (Granlund and Montgomery, "Division by invariant integers using multiplication", PLDI 1994, section 4):
// for a divisor d >= 1 let l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1, which fits 32 bits. Then for
// every 0 <= n < 2^32, n / d = (t + ((n - t) >> 1)) >> (l - 1) with t = umulhi(m, n) (l >= 1). For n < 2^31,
// t + n < 2^32 (t <= n), and that expression equals (t + n) >> l, which also covers d = 1 (l = 0, m = 1, t = 0).
// Exhaustively checked on the host against plain division (tests/test_fast_div.py).
//
// Built on the host (the launchers fill the scheduler's TileDeal); the constructor works on the device too.
#pragma once
#include <cstdint>

namespace fa3nn::hopper {

struct FastDiv {
  int divisor = 1;
  uint32_t multiplier = 1;  // FastDiv() divides by 1
  uint32_t shift = 0;

  FastDiv() = default;

  // d >= 1 (a count of tiles, heads, blocks or CTAs).
  __host__ __device__ __forceinline__ explicit FastDiv(int d) : divisor(d) {
#ifdef __CUDA_ARCH__
    const uint32_t l = d <= 1 ? 0u : 32u - static_cast<uint32_t>(__clz(d - 1));  // ceil(log2 d)
#else
    uint32_t l = 0;
    while ((uint64_t(1) << l) < uint64_t(d)) ++l;
#endif
    shift = l;
    multiplier = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << l) - uint64_t(d))) / uint64_t(d) + 1);
  }

  // n / divisor for 0 <= n < 2^31.
  __host__ __device__ __forceinline__ int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(multiplier, u);
#else
    const uint32_t t = static_cast<uint32_t>((uint64_t(multiplier) * u) >> 32);
#endif
    return static_cast<int>((t + u) >> shift);
  }

  // quotient and remainder of n / divisor for 0 <= n < 2^31.
  __host__ __device__ __forceinline__ int divmod(int n, int& rem) const {
    const int q = div(n);
    rem = n - q * divisor;
    return q;
  }
};

}  // namespace fa3nn::hopper
