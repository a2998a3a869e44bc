// Where one sequence of a backward call lives, dense or packed (varlen): its lengths, its first row in Q / dO and in
// K / V, its first row in the fp32 workspaces (lse_log2, delta, dq_accum) and its TMA batch coordinate. Shared by the
// main kernel (flash_bwd.cuh) and the preprocess / postprocess (flash_bwd_prepost.cuh), so both agree on the layout.
//
// Workspaces hold `ws_rows` rows per query head; row r of head h of a sequence is (tma_batch * nheads + h) * ws_rows
// + ws_row0 + r. Dense: (batch, nheads, seqlen_q_rounded) with ws_rows = seqlen_q_rounded and ws_row0 = 0. Varlen:
// (1, nheads, ws_rows) with sequence b starting at the multiple of kBwdRowsRounding at or below cu_seqlens_q[b] +
// b * kBwdRowsRounding, so each sequence owns at least its length rounded up to kBwdRowsRounding rows (whole query
// blocks of every variant, bulk-copied without bounds checks) and ws_rows = (total_q + batch * kBwdRowsRounding)
// rounded down to kBwdRowsRounding covers the last one (FlashAttention-3's varlen padding, computed, not stored).
#pragma once

namespace fa3nn::hopper {

// The workspaces' padding unit: the largest BwdConfig::kBlockM (fa3nn_hopper_bwd_block_m() returns it to Python).
constexpr int kBwdRowsRounding = 128;

__host__ __device__ __forceinline__ int varlen_ws_row0(int q_row0, int batch) {
  return (q_row0 + batch * kBwdRowsRounding) / kBwdRowsRounding * kBwdRowsRounding;
}

// `rows` rounded up to whole kBwdRowsRounding blocks: a dense call's workspace rows per head, and the rows of a
// sequence that the main kernel reads.
__host__ __device__ __forceinline__ int round_up_rows(int rows) {
  return (rows + kBwdRowsRounding - 1) / kBwdRowsRounding * kBwdRowsRounding;
}

struct BwdSeq {
  int seqlen_q, seqlen_k;
  int q_row0, k_row0;  // first row in Q / dO / O / dQ and in K / V / dK / dV (varlen: the packed row; dense: 0)
  int ws_row0;         // first row in the workspaces (above)
  int tma_batch;       // batch index of the tensors and workspaces: the batch (dense), 0 (varlen: one packed batch)
};

// The workspace index of the sequence's query row `row` of `head` (the layout above; times d for dq_accum), with
// ws_rows rows per head: the main kernel's lse_log2 / delta copies and dQ reductions, the pre/postprocess's rows.
__device__ __forceinline__ int64_t ws_row_index(const BwdSeq& seq, int nheads, int ws_rows, int head, int row) {
  return (static_cast<int64_t>(seq.tma_batch) * nheads + head) * ws_rows + seq.ws_row0 + row;
}

// The query side only (the preprocess / postprocess): seqlen_k and k_row0 are 0. cu_seqlens_q null: dense.
__device__ __forceinline__ BwdSeq bwd_seq_q(const int* cu_seqlens_q, int seqlen_q, int batch) {
  if (cu_seqlens_q == nullptr) return BwdSeq{seqlen_q, 0, 0, 0, 0, batch};
  const int q0 = cu_seqlens_q[batch];
  return BwdSeq{cu_seqlens_q[batch + 1] - q0, 0, q0, 0, varlen_ws_row0(q0, batch), 0};
}

// The main kernel's, varlen or not at compile time (a runtime null test left both forms live in the producer's 24
// registers: 8-16 B of spills, nvcc 13.0).
template <bool kVarlen>
__device__ __forceinline__ BwdSeq bwd_seq(const int* cu_seqlens_q, const int* cu_seqlens_k, int seqlen_q, int seqlen_k,
                                          int batch) {
  if constexpr (!kVarlen) {
    return BwdSeq{seqlen_q, seqlen_k, 0, 0, 0, batch};
  } else {
    const int q0 = cu_seqlens_q[batch], k0 = cu_seqlens_k[batch];
    return BwdSeq{cu_seqlens_q[batch + 1] - q0, cu_seqlens_k[batch + 1] - k0, q0, k0, varlen_ws_row0(q0, batch), 0};
  }
}

}  // namespace fa3nn::hopper
