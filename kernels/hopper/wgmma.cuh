// Warpgroup MMA (wgmma, sm_90a): shared-memory matrix descriptors, the ordering instructions, and the per-shape
// wrappers generated into wgmma_ops.cuh. See HOPPER_PRIMER.md sections 1-3.
//
// Shared-memory tiles are stored as 128B-swizzled "panels": rows x 64 sixteen-bit elements (128 B per row), each
// 8-row group one 1024-B swizzle atom, every panel 1024-B aligned. That is exactly what a TMA box of 64 elements
// with CU_TENSOR_MAP_SWIZZLE_128B writes.
#pragma once
#include <cstdint>

#include "mbarrier.cuh"
#include "wgmma_ops.cuh"

namespace fa3nn::hopper {

constexpr int kPanelCols = 64;           // 16-bit elements per 128-B swizzled row
constexpr int kPanelRowBytes = 128;

// Descriptor of a K-major SW128 operand whose first row starts at `smem` (1024-B aligned panel base plus a k offset
// of 32 B per k16 step). SBO = 1024 B between 8-row groups; LBO is unused for swizzled K-major layouts.
__device__ __forceinline__ uint64_t make_desc_kmajor_sw128(uint32_t smem) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(1) << 16;                 // LBO (unused)
  desc |= static_cast<uint64_t>(1024 >> 4) << 32;         // SBO
  desc |= static_cast<uint64_t>(1) << 62;                 // 128B swizzle
  return desc;
}

// Descriptor of an MN-major SW128 B operand (V with the head dim contiguous, read with trans-b = 1): 8 K-rows of
// 128 B form one atom (SBO = 1024 B between K groups); consecutive 64-wide N panels are `panel_bytes` apart (LBO).
__device__ __forceinline__ uint64_t make_desc_mnmajor_sw128(uint32_t smem, uint32_t panel_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((panel_bytes & 0x3FFFF) >> 4) << 16;  // LBO
  desc |= static_cast<uint64_t>(1024 >> 4) << 32;                     // SBO
  desc |= static_cast<uint64_t>(1) << 62;
  return desc;
}

// Orders this thread's earlier register writes (accumulators, A fragments) before the next wgmma reads them.
__device__ __forceinline__ void warpgroup_arrive() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Compiler-only fences: keep the compiler from moving accesses to these registers across the wgmma asm statements
// (the hardware ordering is wgmma.fence / wait_group; this is the software half).
template <int N>
__device__ __forceinline__ void fence_operands(float (&regs)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(regs[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&regs)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(regs[i])::"memory");
}

// acc(64 x N) (+)= A(64 x D) B(N x D)^T, A and B K-major SW128 panels of D/64 panels each.
// a_panel0/b_panel0: shared addresses of the first panel; a_panel_bytes/b_panel_bytes: stride between panels.
template <int N, int D, bool kBF16>
__device__ __forceinline__ void gemm_ss(float (&acc)[N / 2], uint32_t a_panel0, uint32_t a_panel_bytes,
                                        uint32_t b_panel0, uint32_t b_panel_bytes, bool accumulate) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    const uint32_t k_off = (k % 4) * 32;
    const uint64_t da = make_desc_kmajor_sw128(a_panel0 + (k / 4) * a_panel_bytes + k_off);
    const uint64_t db = make_desc_kmajor_sw128(b_panel0 + (k / 4) * b_panel_bytes + k_off);
    WgmmaSS<N, kBF16>::mma(acc, da, db, (accumulate || k > 0) ? 1 : 0);
  }
}

// acc(64 x D) += P(64 x K) V(K x D): P from registers (K/16 fragments of 4 regs), V MN-major SW128 in D/64 panels of
// K rows x 128 B each, `v_panel_bytes` apart.
template <int K, int D, bool kBF16>
__device__ __forceinline__ void gemm_rs(float (&acc)[D / 2], const uint32_t (&p)[K / 16][4], uint32_t v_panel0,
                                        uint32_t v_panel_bytes) {
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const uint64_t db = make_desc_mnmajor_sw128(v_panel0 + k * 16 * kPanelRowBytes, v_panel_bytes);
    WgmmaRS<D, kBF16>::mma(acc, p[k], db, 1);
  }
}

}  // namespace fa3nn::hopper
