// The backward's two small kernels around the main one (flash_bwd.cuh):
//   preprocess: per query row, delta = rowsum(dO * O) - dlse in fp32 and lse_log2 = lse * log2(e) (+inf for rows past
//       seqlen_q and rows whose lse is -inf, so the main kernel's P is exactly 0 there), into arrays padded to a
//       multiple of 128 rows (kBwdRowsRounding: the main kernel bulk-copies them per block, no bounds checks);
//       zeroes dq_accum.
//   postprocess: dQ = dq_accum * softmax_scale, converted to the input dtype.
// Varlen (cu_seqlens_q set): blockIdx.z is the sequence, rows count from its first (flash_bwd_seq.cuh's layout), the
// grid covers the longest; the preprocess fills each sequence's rows up to its length rounded to kBwdRowsRounding
// (what the main kernel reads), blocks past them return at once.
// Both are memory-bound elementwise passes: one warp per query row, 8 rows per 256-thread block, or (the *_vec_kernel
// forms below, where the tensors allow) one lane per 8 elements with 16-byte accesses.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flash_bwd_seq.cuh"
#include "global_access.cuh"

namespace fa3nn::hopper {

struct BwdPrePostParams {
  const void* out;
  const void* dout;
  const float* lse;   // (batch, nheads, lse_rows) natural log, from the forward (varlen: (nheads, total_q))
  const float* dlse;  // the gradient into lse, same layout, or null (none)
  const int* cu_seqlens_q;  // varlen: (batch + 1) packed row offsets; null: dense
  void* dq;
  float* dq_accum;   // (batch, nheads, seqlen_q_rounded, d)
  float* lse_log2;   // (batch, nheads, seqlen_q_rounded)
  float* delta;
  int64_t out_batch_stride, out_row_stride, out_head_stride;  // elements
  int64_t dout_batch_stride, dout_row_stride, dout_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int seqlen_q, seqlen_q_rounded, nheads;  // varlen: the longest sequence, the workspaces' rows per head
  int lse_rows;                             // lse's rows per head: seqlen_q dense, total_q varlen
  float softmax_scale;
};

constexpr int kPrePostRowsPerBlock = 8;  // one warp per row

template <bool kBF16>
__device__ __forceinline__ float to_float(uint16_t bits) {
  if constexpr (kBF16) {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

template <bool kBF16>
__device__ __forceinline__ uint16_t from_float(float x) {
  if constexpr (kBF16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  } else {
    return __half_as_ushort(__float2half_rn(x));
  }
}

// Element `col` of row (batch, row, head) of a (batch, seqlen, heads, d) 16-bit tensor with these element strides.
template <class T>
__device__ __forceinline__ T* element(T* base, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                                      int batch, int row, int head, int col) {
  return base + batch * batch_stride + row * row_stride + head * head_stride + col;
}

// Index of the sequence's query row `row` of `head` in the fp32 workspaces (flash_bwd_seq.cuh).
__device__ __forceinline__ int64_t stat_index(const BwdPrePostParams& p, const BwdSeq& seq, int head, int row) {
  return ws_row_index(seq, p.nheads, p.seqlen_q_rounded, head, row);
}

// Whether a preprocess block starting at the sequence's row `first_row` has rows the main kernel reads: dense, every
// block of the grid (seqlen_q_rounded rows); varlen, those below the sequence's length rounded to kBwdRowsRounding.
__device__ __forceinline__ bool preprocess_block_used(const BwdPrePostParams& p, const BwdSeq& seq, int first_row) {
  if (p.cu_seqlens_q == nullptr) return true;
  return first_row < round_up_rows(seq.seqlen_q);
}

// One query row's delta and lse_log2 from its rowsum(dO * O); row < seq.seqlen_q.
__device__ __forceinline__ void write_row_stats(const BwdPrePostParams& p, int64_t stat, const BwdSeq& seq, int head,
                                                int row, float sum) {
  const int64_t lse_index = (static_cast<int64_t>(seq.tma_batch) * p.nheads + head) * p.lse_rows + seq.q_row0 + row;
  const float lse = p.lse[lse_index];
  // dlse enters dS = P * (dP - delta) as dS += P * dlse (d lse / d S = P), i.e. delta -= dlse.
  p.delta[stat] = p.dlse != nullptr ? sum - p.dlse[lse_index] : sum;
  p.lse_log2[stat] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

// Grid (seqlen_q_rounded / 8, nheads, batch), 256 threads: warp w handles query row 8 * blockIdx.x + w. kHeadDim:
// dq_accum's row (Q's head dim), kHeadDimV: out's and dout's (V's).
template <int kHeadDim, int kHeadDimV, bool kBF16>
__global__ void __launch_bounds__(256) flash_bwd_preprocess_kernel(const BwdPrePostParams p) {
  constexpr int kPerLane = kHeadDimV / 32;  // consecutive elements per lane (2 for d64, 4 for d128)
  constexpr int kAccumPerLane = kHeadDim / 32;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kPrePostRowsPerBlock + threadIdx.x / 32;
  const int head = blockIdx.y;
  const BwdSeq seq = bwd_seq_q(p.cu_seqlens_q, p.seqlen_q, blockIdx.z);
  if (!preprocess_block_used(p, seq, blockIdx.x * kPrePostRowsPerBlock)) return;
  const int64_t stat = stat_index(p, seq, head, row);
  float* accum_row = p.dq_accum + stat * kHeadDim + lane * kAccumPerLane;
#pragma unroll
  for (int i = 0; i < kAccumPerLane; ++i) accum_row[i] = 0.f;
  if (row >= seq.seqlen_q) {
    if (lane == 0) {
      p.delta[stat] = 0.f;
      p.lse_log2[stat] = INFINITY;
    }
    return;
  }
  const uint16_t* o = element(static_cast<const uint16_t*>(p.out), p.out_batch_stride, p.out_row_stride,
                              p.out_head_stride, seq.tma_batch, seq.q_row0 + row, head, lane * kPerLane);
  const uint16_t* d_o = element(static_cast<const uint16_t*>(p.dout), p.dout_batch_stride, p.dout_row_stride,
                                p.dout_head_stride, seq.tma_batch, seq.q_row0 + row, head, lane * kPerLane);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sum += to_float<kBF16>(o[i]) * to_float<kBF16>(d_o[i]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  if (lane == 0) write_row_stats(p, stat, seq, head, row, sum);
}

// Grid (ceil(seqlen_q / 8), nheads, batch), 256 threads.
template <int kHeadDim, bool kBF16>
__global__ void __launch_bounds__(256) flash_bwd_postprocess_kernel(const BwdPrePostParams p) {
  constexpr int kPerLane = kHeadDim / 32;
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kPrePostRowsPerBlock + threadIdx.x / 32;
  const BwdSeq seq = bwd_seq_q(p.cu_seqlens_q, p.seqlen_q, blockIdx.z);
  if (row >= seq.seqlen_q) return;
  const int head = blockIdx.y;
  const int64_t stat = stat_index(p, seq, head, row);
  const float* accum_row = p.dq_accum + stat * kHeadDim + lane * kPerLane;
  uint16_t* dq = element(static_cast<uint16_t*>(p.dq), p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride,
                         seq.tma_batch, seq.q_row0 + row, head, lane * kPerLane);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) dq[i] = from_float<kBF16>(accum_row[i] * p.softmax_scale);
}

// The same two passes with 16-byte accesses, for out and dout (the preprocess) / dq (the postprocess) whose base
// addresses are 16-B aligned and whose strides are multiples of 8 elements (flash_bwd_launch.cuh checks, each pass on
// its own tensors; TMA's own requirements for out and dout), and a 16-B aligned dq_accum: a lane
// owns 8 consecutive elements of a row (one 16-B load of O and one of dO; two 16-B stores into dq_accum), so a row is
// kHeadDim / 8 lanes and a warp covers 32 / (kHeadDim / 8) rows (d192's dq: one row of 24 lanes, 8 idle). The kernels
// above issue one 2-byte load per element and one 4-byte store per accumulator float.
template <int kHeadDim>
struct PrePostVec {
  static constexpr int kLanesPerRow = kHeadDim / 8;
  static constexpr int kRowsPerWarp = 32 / kLanesPerRow;
  static constexpr int kRowsPerBlock = 8 * kRowsPerWarp;  // 256 threads
  static constexpr bool kPowerOfTwo = (kLanesPerRow & (kLanesPerRow - 1)) == 0;  // rows fill the warp
  static_assert(kLanesPerRow <= 32, "a row's lanes within one warp");
};

template <bool kBF16>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum += to_float<kBF16>(static_cast<uint16_t>(av[i])) * to_float<kBF16>(static_cast<uint16_t>(bv[i]));
    sum += to_float<kBF16>(static_cast<uint16_t>(av[i] >> 16)) * to_float<kBF16>(static_cast<uint16_t>(bv[i] >> 16));
  }
  return sum;
}

// Grid (seqlen_q_rounded / kRowsPerBlock, nheads, batch), 256 threads; rows of out / dout (kHeadDimV) as the lanes'
// unit, each lane zeroing kHeadDim / kLanesPerRow floats of dq_accum's row.
template <int kHeadDim, int kHeadDimV, bool kBF16>
__global__ void __launch_bounds__(256) flash_bwd_preprocess_vec_kernel(const BwdPrePostParams p) {
  using V = PrePostVec<kHeadDimV>;
  static_assert(V::kPowerOfTwo, "the row sum's shuffles pair lanes within a row");
  constexpr int kAccumPerLane = kHeadDim / V::kLanesPerRow;  // floats: 8 for equal head dims, 12 for 192 / 128
  static_assert(kAccumPerLane % 4 == 0, "dq_accum zeroed 16 bytes at a time");
  const int lane = threadIdx.x % 32, part = lane % V::kLanesPerRow;
  const int row = blockIdx.x * V::kRowsPerBlock + (threadIdx.x / 32) * V::kRowsPerWarp + lane / V::kLanesPerRow;
  const int head = blockIdx.y;
  const BwdSeq seq = bwd_seq_q(p.cu_seqlens_q, p.seqlen_q, blockIdx.z);
  if (!preprocess_block_used(p, seq, blockIdx.x * V::kRowsPerBlock)) return;  // the whole block: no shuffle split
  const int64_t stat = stat_index(p, seq, head, row);
  float4* accum = reinterpret_cast<float4*>(p.dq_accum + stat * kHeadDim + part * kAccumPerLane);
#pragma unroll
  for (int i = 0; i < kAccumPerLane / 4; ++i) accum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  const bool valid = row < seq.seqlen_q;
  float sum = 0.f;
  if (valid) {
    const uint16_t* o = element(static_cast<const uint16_t*>(p.out), p.out_batch_stride, p.out_row_stride,
                                p.out_head_stride, seq.tma_batch, seq.q_row0 + row, head, part * 8);
    const uint16_t* d_o = element(static_cast<const uint16_t*>(p.dout), p.dout_batch_stride, p.dout_row_stride,
                                  p.dout_head_stride, seq.tma_batch, seq.q_row0 + row, head, part * 8);
    sum = dot8<kBF16>(ld_global_16(o), ld_global_16(d_o));
  }
#pragma unroll
  for (int offset = V::kLanesPerRow / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  if (part != 0) return;
  if (!valid) {
    p.delta[stat] = 0.f;
    p.lse_log2[stat] = INFINITY;
    return;
  }
  write_row_stats(p, stat, seq, head, row, sum);
}

// Grid (ceil(seqlen_q / kRowsPerBlock), nheads, batch), 256 threads.
template <int kHeadDim, bool kBF16>
__global__ void __launch_bounds__(256) flash_bwd_postprocess_vec_kernel(const BwdPrePostParams p) {
  using V = PrePostVec<kHeadDim>;
  const int lane = threadIdx.x % 32, part = lane % V::kLanesPerRow;
  if (!V::kPowerOfTwo && lane >= V::kRowsPerWarp * V::kLanesPerRow) return;  // lanes past the warp's rows
  const int row = blockIdx.x * V::kRowsPerBlock + (threadIdx.x / 32) * V::kRowsPerWarp + lane / V::kLanesPerRow;
  const BwdSeq seq = bwd_seq_q(p.cu_seqlens_q, p.seqlen_q, blockIdx.z);
  if (row >= seq.seqlen_q) return;
  const int head = blockIdx.y;
  const int64_t stat = stat_index(p, seq, head, row);
  const float4* accum = reinterpret_cast<const float4*>(p.dq_accum + stat * kHeadDim + part * 8);
  const float4 lo = accum[0], hi = accum[1];
  const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t packed[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    packed[i] = from_float<kBF16>(x[2 * i] * p.softmax_scale) |
                (static_cast<uint32_t>(from_float<kBF16>(x[2 * i + 1] * p.softmax_scale)) << 16);
  uint16_t* dq = element(static_cast<uint16_t*>(p.dq), p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride,
                         seq.tma_batch, seq.q_row0 + row, head, part * 8);
  st_global_16(dq, make_uint4(packed[0], packed[1], packed[2], packed[3]));
}

}  // namespace fa3nn::hopper
