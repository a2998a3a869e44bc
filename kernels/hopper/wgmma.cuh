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

// wgmma_wait<kPending> that ptxas cannot move above the code computing `after` (here: the softmax row sums, so every
// exp2 of the block): the wait is guarded by a predicate read from those registers. A plain wgmma_wait is an
// instruction without operands, and ptxas hoisted it above the whole softmax in every forward kernel (SASS of
// 2026-12-01: 0 of 66 MUFU.EX2 between the wait for Q K^T and the wait for P V at d128), which turned the
// intra-warpgroup overlap off: the softmax started only after P V had finished. The predicate is always true (no
// float produced by arithmetic has the bit pattern 0xFFFFFFFF, a NaN with every sign and payload bit set; the GPU's
// canonical NaN is 0x7FFFFFFF), so every thread waits; it costs two ISETP and a branch.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_after(const float (&after)[2]) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %1, -1;\n setp.ne.and.b32 p, %2, -1, p;\n"
      " @p wgmma.wait_group.sync.aligned %0;\n}" ::"n"(kPending),
      "r"(__float_as_uint(after[0])), "r"(__float_as_uint(after[1]))
      : "memory");
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

// A descriptor moved by `bytes` inside shared memory: the start address field is the low 14 bits of (addr >> 4) and
// every tile here stays below 256 KB, so adding (bytes >> 4) to the descriptor never carries out of the field.
// This keeps the per-k-step cost at one 64-bit add of an immediate instead of re-encoding the address.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// acc(64 x N) (+)= A(64 x D) B(N x D)^T, A and B K-major SW128 panels, D/64 panels each, kAPanelBytes /
// kBPanelBytes apart; desc_a / desc_b describe the first k16 step of the first panel.
template <int N, int D, bool kBF16, uint32_t kAPanelBytes, uint32_t kBPanelBytes>
__device__ __forceinline__ void gemm_ss(float (&acc)[N / 2], uint64_t desc_a, uint64_t desc_b) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    const uint32_t k_off = (k % 4) * 32;
    WgmmaSS<N, kBF16>::mma(acc, desc_advance(desc_a, (k / 4) * kAPanelBytes + k_off),
                           desc_advance(desc_b, (k / 4) * kBPanelBytes + k_off), k > 0 ? 1 : 0);
  }
}

// acc(64 x D) += P(64 x K) V(K x D): P from registers (K/16 fragments of 4 regs), V MN-major SW128 in D/64 panels of
// K rows x 128 B each; desc_v describes the first 16 rows (make_desc_mnmajor_sw128 with LBO = the panel stride).
template <int K, int D, bool kBF16>
__device__ __forceinline__ void gemm_rs(float (&acc)[D / 2], const uint32_t (&p)[K / 16][4], uint64_t desc_v) {
#pragma unroll
  for (int k = 0; k < K / 16; ++k) WgmmaRS<D, kBF16>::mma(acc, p[k], desc_advance(desc_v, k * 16 * kPanelRowBytes), 1);
}

}  // namespace fa3nn::hopper
