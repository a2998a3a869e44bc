// FlashAttention backward for Hopper (FA3 Algorithm 3 / FA2 backward); run and timed on the H200 (benchmarks/NOTES.md).
// One tile per (key block of kBlockN = 128 keys, K/V head, batch); one producer warpgroup, two consumer warpgroups.
// Head dim 256 takes 64-key blocks whose consumers split the head dim instead (flash_bwd_cols.cuh, BwdConfig).
// A CTA computes one tile, or (persistent launch) chains tiles with one K/V buffer (BwdCtaTiles). Per tile it walks
// every query head of its K/V head's group (GQA/MQA: heads kv_head * group .. + group - 1; MHA: group 1), each over
// its query blocks, as one sequence of steps (BwdQueryWalk): dK/dV sum over the tile's query heads in registers and
// are written once per tile, with no atomics (so deterministic). GQA in parts (BwdParams::kv_parts): a tile
// walks group / parts of the heads and writes an fp32 partial dK/dV, which the caller sums.
//
//   producer (warpgroup 0, one elected thread): K_n and V_n once, then for each step (query head h, query block m of
//       64 rows) Q_m and dO_m of head h (TMA, SW128 panels) plus lse_log2_m and delta_m (64 floats each, bulk copies)
//       into a kStages ring.
//   consumer c (warpgroups 1, 2) owns keys [64c, 64c + 64) of the block. Per query block, with transposed scores so
//       that keys are the wgmma M dimension and P^T / dS^T come out of the accumulators already as A fragments:
//         S^T  = K_c Q^T            SS, both K-major                         (64 keys x 64 queries)
//         dP^T = V_c dO^T           SS, both K-major
//         P^T  = exp2(S^T * scale_log2 - lse_log2[query])   (causal mask only on blocks crossing the diagonal)
//         dS^T = P^T * (dP^T - delta[query])
//         dV_c += P^T dO            RS, dO read N-major (trans-b)            (64 keys x d, registers across m)
//         dK_c += dS^T Q            RS, Q read N-major
//         dS^T -> shared memory (keys x queries, SW128), so both warpgroups' keys form dS for:
//         dQ_m += dS K              SS, dS M-major (trans-a), K N-major (trans-b), fp32 atomics into dq_accum
//       d128 splits dQ by head-dim columns (warpgroup c: columns [64c, 64c + 64), all 128 keys: one barrier over
//       both consumers per block); d64 splits it by keys (warpgroup c: its own 64 keys, all 64 columns, no
//       cross-warpgroup barrier, twice the atomics).
//   After the loop each consumer writes dK_c * softmax_scale and dV_c (rows past seqlen_k skipped).
//
// Bulk dQ (kDQBulk, variant 1 of fa3nn_hopper_bwd; FA3's dQ path): instead of per-thread red.global.add.v2.f32, each
// consumer writes its fp32 dQ fragment to a shared-memory tile (64 rows x 32-column panels, 128B-swizzled, double
// buffered), fences it to the async proxy and arrives on that buffer's "full" named barrier; warp 1 of the producer
// warpgroup (the dQ writer) syncs on it and one of its lanes adds the tile into dq_accum with TMA reduce-adds
// (cp.reduce.async.bulk.tensor, one per panel), waits until they have read the buffer, and arrives on its "empty"
// barrier, which the consumers sync on before they write that buffer again two query blocks later. d128's column
// split fills one 64 x 128 tile; d64's key split gives each warpgroup its own 64 x 64 tile (two reduces per step).
// d128's bulk dQ (its default) runs FlashAttention-3's order: dV issued before dS^T is stored, then dQ, then dK, and
// dQ staged while dK runs (bwd_consumer; +0-3.4% over bulk dQ + overlap, benchmarks/NOTES.md "forty-first session").
//
// 128-row query blocks (kBlockM 128, variant 4 "m128", d64's default): each step covers 128 queries (S^T, dP^T 64 keys
// x 128 queries per consumer; dV/dK reduce over 128 queries), dQ is split by query rows (consumer c: rows [64c,
// 64c + 64) over all 128 keys, so one 256-thread dS barrier as d128's) into one bulk dQ buffer; per FLOP half the
// waits, barriers and hand-offs of 64-row steps: 1.14-1.37x at d64 (benchmarks/NOTES.md).
//
// Overlap (kOverlap, variants 2 and 3): a second consumer, bwd_consumer_overlap in flash_bwd_overlap.cuh, that issues
// step j - 1's dQ GEMM after step j's score GEMMs; the consumer below is the default's and is unchanged.
//
// Registers per consumer thread (fp32 accumulators: N/2 per 64-row wgmma): d128: dK 64 + dV 64 + S^T 32 + dP^T 32
// + dQ 32, with S^T/dP^T dead (packed into 16 + 16 A-fragment registers) before dQ is live: 192 accumulator
// registers at the peak; ptxas allocates up to R237 of 240 (d64: R205 / R212), 0 spills (scripts/check_kernels.py).
//
// Query rows past seqlen_q arrive as zeros (TMA zero fill) and their lse_log2 is +inf (preprocess), so P = 0 there;
// rows whose forward lse is -inf (they attend no key) also get +inf, so they contribute nothing instead of NaN.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "bulk_copy.cuh"
#include "fast_div.cuh"
#include "flash_bwd_seq.cuh"
#include "flash_bwd_trace.cuh"
#include "global_access.cuh"
#include "mbarrier.cuh"
#include "named_barrier.cuh"
#include "pack16.cuh"
#include "pipeline.cuh"
#include "regs.cuh"
#include "shared_store.cuh"
#include "softmax.cuh"  // softcap_tanh
#include "tma.cuh"
#include "tma_reduce.cuh"
#include "warp_specialized.cuh"
#include "wgmma.cuh"

namespace fa3nn::hopper {

// The order of the main kernel's tiles (BwdParams::tile_order, bwd_tile; chosen in flash_bwd_launch.cuh tile_order).
enum BwdTileOrder : int { kKeyBlocksInner = 0, kKeyBlocksOuter = 1, kKeyBlocksPerBatch = 2 };

struct BwdParams {
  float* dq_accum;        // (batch, nheads, seqlen_q_rounded, d) fp32, zeroed by the preprocess kernel
  const float* lse_log2;  // (batch, nheads, seqlen_q_rounded): lse * log2(e); +inf on padded / empty rows
  const float* delta;     // (batch, nheads, seqlen_q_rounded): rowsum(dO * O)
  void* dk;
  void* dv;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;  // elements
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
  int seqlen_q, seqlen_k, seqlen_q_rounded;
  int nheads;  // query heads (Q, dO, lse, delta, dq_accum); K, V, dK, dV have nheads / (group * kv_parts)
  int group;   // query heads per tile's K/V head: 1 MHA, nheads MQA; GQA in parts: the group / parts
  // GQA in parts (a divisor of the group): each K/V head's group is walked by `kv_parts` tiles, tile K/V head
  // v = head * kv_parts + part reading K/V head v / kv_parts and walking query heads v * group .. (group being the
  // part's), its dK / dV a partial sum written to fp32 buffers with kv_parts x nheads_kv heads (dkdv_f32), which the
  // caller sums. 1 / 0: whole groups, dK / dV in the inputs' 16-bit type.
  int kv_parts;
  int dkdv_f32;
  // Tiles (key block, K/V head, batch), numbered in the launch's order (bwd_tile, BwdTileOrder): key blocks
  // innermost (key blocks fastest, nheads_kv, batch), outermost (nheads_kv fastest, batch, key blocks) or outermost
  // per batch (nheads_kv fastest, key blocks, batch); tile_inner / tile_middle divide by the two fastest counts. A
  // CTA walks tiles blockIdx.x, + gridDim.x, ... (BwdCtaTiles).
  int tile_order;
  int num_tiles;
  FastDiv tile_inner, tile_middle;
  int dkdv_vec16;   // nonzero: dK / dV stored 16 bytes at a time (BwdConsumer::store_rows)
  int num_m_blocks;
  float scale_log2;     // softmax_scale * log2(e) (kSoftcap: softcap * log2(e), below)
  float softmax_scale;
  // Varlen (BwdConfig::kVarlen): (batch + 1) packed row offsets; batch counts sequences, seqlen_q / seqlen_k are the
  // longest ones, the tensors are one packed batch and the workspaces (1, nheads, seqlen_q_rounded) with each
  // sequence at its own padded offset (flash_bwd_seq.cuh). Unread by dense kernels.
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  // Sliding window (BwdConfig::kLocal): query row i sees key j iff i + off - window_left <= j <= i + off +
  // window_right, off = seqlen_k - seqlen_q, -1 = unbounded on that side (fa3nn/masks.py). Unread by other kernels.
  int window_left, window_right;
  // Softcap (BwdConfig::kSoftcap): scores are cap * tanh(score * softmax_scale / cap); softcap_pre = softmax_scale /
  // cap, and scale_log2 above is then cap * log2(e) (the forward's convention). Unread by other kernels.
  float softcap_pre;
};

// The shared memory of the tiles the producer publishes to the consumers (BwdConfig::kPublishTiles,
// BwdPublished).
constexpr uint32_t kBwdPublishedBytes = 128;

template <int kHeadDim_, int kStages_, bool kBF16_, bool kCausal_, bool kDQBulk_ = false, bool kOverlap_ = false,
          int kBlockM_ = 64, bool kVarlen_ = false, bool kLocal_ = false, bool kSoftcap_ = false,
          int kHeadDimV_ = kHeadDim_, bool kMlaKeySplit_ = false>
struct BwdConfig {
  static constexpr int kHeadDim = kHeadDim_, kStages = kStages_;
  // V's, O's and dO's head dim (kHeadDim: Q's and K's). Differs only in multi-head latent attention's 192 / 128
  // (kPanelSplit below).
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr bool kBF16 = kBF16_, kCausal = kCausal_;
  // Sliding windows (BwdParams::window_left / window_right, either side bounded; causal is the window (-1, 0) and
  // has kCausal instead): the mask, each key block's query-block range and tiles without a step skipped by every role
  // (their dK / dV zeroed by the caller), as varlen's. Dense or varlen, default variants only (flash_bwd_launch.cuh,
  // run_bwd_default).
  static constexpr bool kLocal = kLocal_;
  static_assert(!(kLocal_ && kCausal_), "a window kernel takes causal as a window");
  static constexpr bool kSkipsEmptyTiles = kVarlen_ || kLocal_;
  // Softcap (Gemma 2; BwdParams::softcap_pre): the consumers keep t = tanh(score * softmax_scale / cap) in the score
  // registers until dP^T has landed, then take P^T = exp2(t * cap * log2 e - lse_log2) and dS^T = P^T * (dP^T -
  // delta) * (1 - t^2) in one pass (BwdConsumer::softcap_dscores): no register array beyond the plain kernels'.
  // Default variants only (flash_bwd_launch.cuh, run_bwd_default).
  static constexpr bool kSoftcap = kSoftcap_;
  // Packed sequences (BwdParams::cu_seqlens_*): per-tile lengths and row offsets (bwd_tile), empty tiles skipped
  // (BwdCtaTiles). A separate instantiation, so the dense kernels carry none of it.
  static constexpr bool kVarlen = kVarlen_;
  static constexpr bool kDQBulk = kDQBulk_;  // dQ through shared memory and TMA reduce-adds (file comment)
  // Next query block's S^T (and, d64, dP^T) issued before this block's dQ GEMM (flash_bwd_overlap.cuh); d128 has no
  // registers for dP^T ahead (224 accumulator registers of 240).
  static constexpr bool kOverlap = kOverlap_;
  static constexpr bool kOverlapDP = kOverlap_ && kHeadDim_ < 128;
  // Query rows per step. 64: one wgmma M of dQ. 128 (variant m128, d64 with bulk dQ only): twice the work per step
  // for the same barriers, waits and hand-offs (FA3's d64 tile is 128 x 128); dQ is then split by query rows.
  static constexpr int kBlockM = kBlockM_;
  static_assert(kBlockM == 64 || (kBlockM == 128 && kHeadDim_ == 64 && kDQBulk_ && !kOverlap_),
                "kBlockM 128 is built for head dim 64 with bulk dQ and without overlap only");
  // Head dim 256 (flash_bwd_cols.cuh): dK and dV of 64 keys x 256 columns are 256 fp32 registers per thread of one
  // warpgroup, so the two consumers split the head dim instead of the keys: a 64-key block, consumer c owns columns
  // [128c, 128c + 128) of dK, dV and dQ and the queries [32c, 32c + 32) of S^T / dP^T, and P^T joins dS^T in shared
  // memory (both warpgroups read all 64 queries of each). Its shared memory (K 32 + V 32 + two Q / dO stages 128 +
  // P^T and dS^T 2 x 2 x 8 KB = 224 KB) leaves no room for a bulk dQ tile, so bulk dQ stages in the ring
  // (kDQInRing).
  // Multi-head latent attention (192 / 128; flash_bwd_mla.cuh): the column split's 64-key blocks, with the head dims'
  // 64-column panels dealt to the consumers unevenly (dK's 3, dV's 2, dQ's 3: 4 panel GEMMs each per step), because
  // wgmma reads an N-major (MN-major) SW128 operand in whole 64-column panels only.
  static constexpr bool kPanelSplit = kHeadDimV_ != kHeadDim_;
  static_assert(!kPanelSplit || (kHeadDim_ == 192 && kHeadDimV_ == 128),
                "unequal head dims are built as multi-head latent attention's 192 / 128 only");
  // Multi-head latent attention with 128-key blocks (variant mla_keys, flash_bwd_mla_keys.cuh): the d128 kernel's
  // key split instead of the column split, each warpgroup 64 keys with dK 64 x 192 and dV 64 x 128 in registers (160
  // accumulators), dQ by 64-column panels after the dK / dV GEMMs (warpgroup 0 panels 0-1, warpgroup 1 panel 2), one
  // dS^T buffer. Q / dO loads and dQ's reduce-adds per key halve against the 64-key column split (cuDNN's MLA
  // backward walks 128 keys per CTA: benchmarks/NOTES.md, forty-third session).
  static constexpr bool kMlaKeySplit = kMlaKeySplit_;
  static_assert(!kMlaKeySplit || (kPanelSplit && kDQBulk_ && kBlockM == 64 && !kOverlap_ && !kLocal_ && !kSoftcap_),
                "the MLA key split is built for 192 / 128 with bulk dQ, 64-row query blocks, no window or softcap");
  static constexpr bool kColSplit = kHeadDim_ == 256 || (kPanelSplit && !kMlaKeySplit);
  static_assert(!kColSplit || (kBlockM == 64 && !kOverlap_),
                "head dim 256 is built with 64-row query blocks and without overlap only");
  // Bulk dQ at head dim 256: after its own dK / dV GEMMs nothing reads a warpgroup's column halves of the step's Q
  // and dO (the other warpgroup's reads of them, its S^T / dP^T GEMMs, finished before the P^T / dS^T barrier), so
  // it stages its 64 x 128 fp32 dQ there (4 panels of 32 columns: Q's two, then dO's) and the dQ writer, not the
  // consumers, frees the ring stage once its reduce-adds have read it (flash_bwd_cols.cuh).
  static constexpr bool kDQInRing = kColSplit && kDQBulk_ && !kPanelSplit;
  static constexpr int kBlockN = kColSplit ? 64 : 128;  // keys per CTA (64 per consumer warpgroup unless kColSplit)
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // 128*24 + 256*240 = 64,512 = 384 x 168, the registers the CTA launched with: setmaxnreg only moves registers
  // inside the CTA, so the split may not exceed them. 32 / 240 (65,536) hung every kLocal kernel in the consumers'
  // setmaxnreg.inc (H200, s30h / s30i). kLocal takes 32 / 232 (63,488): at 24 the d128 kLocal producer's step loop
  // spilled a word (the window's query-block end held across it); at 232 the kLocal consumers use up to R223
  // (nvcc 13.0), and the window kernels run (s31a onwards).
  static constexpr int kProducerRegs = kLocal_ ? 32 : 24, kConsumerRegs = kLocal_ ? 232 : 240;
  // dQ split between the two consumers (see the file comment): by head-dim columns needs N = d/2 >= 64 (a full SW128
  // panel of K as the B operand); d64 splits by keys instead.
  // kBlockM 128 splits it by query rows instead: warpgroup c, rows [64c, 64c + 64), all 128 keys, all columns.
  static constexpr bool kDQSplitRows = kBlockM == 128;
  static constexpr bool kDQSplitKeys = !kDQSplitRows && kHeadDim < 128;  // (head dim 256: the column split)
  static constexpr int kDQCols = kDQSplitKeys || kDQSplitRows ? kHeadDim : kHeadDim / 2;  // dQ columns per consumer
  static constexpr int kDQKeys = kDQSplitKeys ? 64 : kBlockN;             // keys one consumer's dQ GEMM sums over
  static constexpr int kPanels = kHeadDim / kPanelCols;    // of K and Q
  static constexpr int kPanelsV = kHeadDimV / kPanelCols;  // of V and dO
  static constexpr uint32_t kKVPanelBytes = kBlockN * kPanelRowBytes;  // 16 KB (a K or V panel)
  static constexpr uint32_t kQPanelBytes = kBlockM * kPanelRowBytes;   // 8 KB (a Q or dO panel)
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * 2;
  static constexpr uint32_t kVBytes = kBlockN * kHeadDimV * 2;
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2;
  static constexpr uint32_t kDOBytes = kBlockM * kHeadDimV * 2;
  static constexpr uint32_t kRowStatBytes = kBlockM * 4;                  // lse_log2 or delta of one query block
  static constexpr int kDSPanels = kBlockM / 64;                          // dS^T: 128 keys x kBlockM queries,
  static constexpr uint32_t kDSPanelBytes = kBlockN * kPanelRowBytes;    // in panels of 64 queries
  static constexpr uint32_t kDSBytes = kDSPanels * kDSPanelBytes;
  static constexpr uint32_t kStageBytes = kQBytes + kDOBytes + 2 * kRowStatBytes;  // what one ring stage receives
  static_assert(kHeadDim % kPanelCols == 0 && kHeadDimV % kPanelCols == 0, "head dims must be multiples of 64");
  // Bulk dQ: fp32 tiles of 64 rows in panels of 32 columns (128 B per row, the widest box a 128B-swizzled map
  // takes); one tile per consumer under the key split (each sums other keys into the same rows) and the row split
  // (rows 64c.. of the step), one shared tile under the column split; two buffers, one under the row split (its
  // 128-row steps leave no room for two; the dQ writer has read a buffer long before the next step stages it).
  static constexpr int kDQPanelCols = 32;
  static constexpr int kDQTileRows = 64;
  static constexpr uint32_t kDQPanelBytes = kDQTileRows * kDQPanelCols * 4;  // 8 KB
  static constexpr int kDQTiles = kDQSplitKeys || kDQSplitRows ? kConsumers : 1;
  // dQ buffer of step s: s & (kDQBuffers - 1). kPanelSplit: one 64 x 192 tile (48 KB) is all that fits beside K 24 +
  // V 16 + two Q / dO stages 80 + P^T and dS^T 32 KB.
  static constexpr int kDQBuffers = kDQSplitRows || kPanelSplit ? 1 : 2;
  static constexpr int kDQTilePanels = kHeadDim / kDQPanelCols;
  static constexpr uint32_t kDQTileBytes = kDQTilePanels * kDQPanelBytes;
  static constexpr uint32_t kDQStageBytes = kDQBulk && !kDQInRing ? kDQTiles * kDQTileBytes : 0;  // 32 KB: d64, d128
  // Named barriers of the bulk dQ handoff, one pair per buffer (ids kFirstId, kFirstId + 1 are the dS barriers):
  // full = both consumers arrive, the dQ writer warp syncs; empty = the writer arrives, the consumers sync.
  static constexpr uint32_t kDQFullBarrier = NamedBarrier::kFirstId + 2;   // + buffer
  static constexpr uint32_t kDQEmptyBarrier = NamedBarrier::kFirstId + 4;  // + buffer
  // The MLA key split's one dS^T buffer free again (flash_bwd_mla_keys.cuh): warpgroup 0's dQ GEMMs done for
  // warpgroup 1 each step.
  static constexpr uint32_t kDSFreeBarrier = NamedBarrier::kFirstId + 6;
  static constexpr uint32_t kDQBarrierThreads = 128 * kConsumers + 32;

  struct Barriers {
    MBarrier kv;       // K and V of the CTA's current tile: one phase per tile (BwdCtaTiles::iter)
    MBarrier kv_free;  // both consumers past their tile's last K/V read: the producer may load the next tile's
    Pipeline<kStages> qdo;

    __device__ __forceinline__ void init(uint32_t consumers) {
      kv.init(1);
      kv_free.init(consumers);
      qdo.init(kDQInRing ? 1 : consumers);  // kDQInRing: the dQ writer frees the stages
    }
  };
  // Shared memory from a 1024-B aligned base: K | V | Q stages | dO stages | dS^T x 2 | P^T x 2 (kColSplit) |
  // dQ x kDQBuffers (bulk dQ) |
  // lse_log2 stages | delta stages | barriers. Every SW128 region starts on a 1024-B boundary.
  static constexpr uint32_t kOffV = kKBytes;
  static constexpr uint32_t kOffQ = kKBytes + kVBytes;
  static constexpr uint32_t kOffDO = kOffQ + kStages * kQBytes;
  static constexpr uint32_t kOffDS = kOffDO + kStages * kDOBytes;
  // dS^T buffers: two (a step's buffer was last read by step - 2's dQ GEMMs); one under the MLA key split (shared
  // memory: K 48 + V 32 + two Q / dO stages 80 + dS^T 16 + one dQ tile 48 = 224 KB of 227), whose consumers sync
  // before writing it (flash_bwd_mla_keys.cuh).
  static constexpr int kDSBuffers = kMlaKeySplit ? 1 : 2;
  static constexpr uint32_t kOffP = kOffDS + kDSBuffers * kDSBytes;  // P^T x 2 (kColSplit only)
  static constexpr uint32_t kOffDQ = kOffP + (kColSplit ? 2 * kDSBytes : 0);
  static constexpr uint32_t kOffLse = kOffDQ + kDQBuffers * kDQStageBytes;
  static constexpr uint32_t kOffDelta = kOffLse + kStages * kRowStatBytes;
  static constexpr uint32_t kOffBarriers = kOffDelta + kStages * kRowStatBytes;
  // The producer publishes each tile (its decode, lengths and rows) in two slots after the barriers, and the consumers
  // read it there (BwdPublishedTiles says why): varlen under the MLA key split, and the default variants' varlen
  // kernels without causal or window at d64 (m128) and, with softcap, d128. Their consumers, decoding tiles
  // themselves, held uniform values in vector registers (nvcc 13.0, step loop against the dense kernel's: d64 1016 /
  // 872 instructions, softcap 2309 / 2158; d128 855 / 703, softcap 1178 / 1025); published, the dense lengths. H100
  // s45a / s45b, x main on the same packed calls: d64 1.00-1.02 (lengths in [256, 4096] 1.02 / 1.07), softcap
  // 1.01-1.02; d128 softcap 1.03-1.08, d128 without softcap 0.98-1.00 (its loop is not issue-bound), so not there.
  // Causal varlen loops are at the dense length already; the window kernels serialized their wgmmas (C7512).
  static constexpr bool kPublishTiles =
      kVarlen && (kMlaKeySplit || (kDQBulk && !kOverlap && !kLocal && !kCausal &&
                                   (kBlockM == 128 || (kHeadDim == 128 && kSoftcap))));
  static constexpr uint32_t kOffPublished = kOffBarriers + sizeof(Barriers);
  static constexpr uint32_t kSmemBytes =
      kOffPublished + (kPublishTiles ? kBwdPublishedBytes : 0) + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "exceeds Hopper's 227 KB of shared memory per block");
};

// Query blocks key block n_block must visit: under a causal mask (bottom-right aligned, as the forward) query row i
// sees key j iff j <= i + seqlen_k - seqlen_q, so rows before n_block * kBlockN - (seqlen_k - seqlen_q) see none of
// the block's keys and their query blocks are skipped.
// kLocal: the same with the window's right bound (unbounded: 0), and bwd_end_m_block the left bound's end.
template <class Cfg>
__device__ __forceinline__ int first_m_block(const BwdParams& p, const BwdSeq& seq, int n_block) {
  if constexpr (Cfg::kLocal) {
    if (p.window_right < 0) return 0;
    const int first_row = n_block * Cfg::kBlockN - (seq.seqlen_k - seq.seqlen_q) - p.window_right;
    return first_row <= 0 ? 0 : first_row / Cfg::kBlockM;
  }
  if constexpr (!Cfg::kCausal) return 0;
  const int first_row = n_block * Cfg::kBlockN - (seq.seqlen_k - seq.seqlen_q);
  return first_row <= 0 ? 0 : first_row / Cfg::kBlockM;
}

// One past the last query block key block n_block must visit: num_m_blocks, or (kLocal, left bound) the block after
// the last row i that sees the block's last key, i + off - window_left <= (n_block + 1) * kBlockN - 1; 0 when none.
template <class Cfg>
__device__ __forceinline__ int bwd_end_m_block(const BwdParams& p, const BwdSeq& seq, int n_block) {
  const int all = Cfg::kVarlen ? (seq.seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM : p.num_m_blocks;
  if constexpr (Cfg::kLocal) {
    if (p.window_left >= 0) {
      const int last_row = (n_block + 1) * Cfg::kBlockN - 1 - (seq.seqlen_k - seq.seqlen_q) + p.window_left;
      const int end = last_row < 0 ? 0 : last_row / Cfg::kBlockM + 1;
      return end < all ? end : all;
    }
  }
  return all;
}

// Whether query block m_block has a masked (query, key) pair in key block n_block: some key past seqlen_k, or some
// key above the diagonal of the block's first row.
// kLocal: or some key beyond the window of the block's first row (right bound) or before that of its last row (left).
// (The forward's block_needs_mask, flash_fwd.cuh, is the same test. One helper for both, tried: every forward kernel
// and the backward's window kernels came out with other instructions (end > seqlen_k against last_key >= seqlen_k,
// the window bounds' registers), which would need a GPU run to re-validate; the copies stay.)
template <class Cfg>
__device__ __forceinline__ bool bwd_block_needs_mask(const BwdParams& p, const BwdSeq& seq, int m_block,
                                                     int n_block) {
  const int last_key = (n_block + 1) * Cfg::kBlockN - 1;
  bool need = last_key >= seq.seqlen_k;
  if constexpr (Cfg::kCausal) need |= last_key > m_block * Cfg::kBlockM + seq.seqlen_k - seq.seqlen_q;
  if constexpr (Cfg::kLocal) {
    const int off = seq.seqlen_k - seq.seqlen_q;
    need |= p.window_right >= 0 && last_key > m_block * Cfg::kBlockM + off + p.window_right;
    need |= p.window_left >= 0 && n_block * Cfg::kBlockN < (m_block + 1) * Cfg::kBlockM - 1 + off - p.window_left;
  }
  return need;
}

// A tile's key block, K/V head and batch. Two orders (the launch picks, flash_bwd_launch.cuh): key blocks fastest,
// (key blocks, nheads_kv, batch), the MHA order; or slowest, (nheads_kv, batch, key blocks), which deals key block 0
// of every (K/V head, batch) first: under a causal mask block 0 is the longest tile, by a factor group under GQA, and
// starting the longest first shortens the tail.
// Varlen: batch is the sequence, seq its lengths and rows (dense: the call's, flash_bwd_seq.cuh).
struct BwdTile {
  int n_block, kv_head, batch;
  BwdSeq seq;
};

template <class Cfg>
__device__ __forceinline__ BwdTile bwd_tile(const BwdParams& p, int tile) {
  int x, y;
  const int z = p.tile_middle.divmod(p.tile_inner.divmod(tile, x), y);
  BwdTile t = p.tile_order == kKeyBlocksOuter      ? BwdTile{z, x, y}
              : p.tile_order == kKeyBlocksPerBatch ? BwdTile{y, x, z}
                                                   : BwdTile{x, y, z};
  t.seq = bwd_seq<Cfg::kVarlen>(p.cu_seqlens_q, p.cu_seqlens_k, p.seqlen_q, p.seqlen_k, t.batch);
  return t;
}

// Varlen tiles past their sequence's keys (the grid counts key blocks of the longest), or of a sequence without
// queries, have no step: every role skips them (BwdCtaTiles), so no barrier phase is spent on them, and their dK / dV
// rows are zeroed by the caller before the launch (hopper_bwd.launch). A dense tile always has a step, unless a
// window keeps every query row off its keys (kLocal: first_m_block .. bwd_end_m_block empty): skipped, and zeroed by
// the caller, the same way (dense or varlen).
template <class Cfg>
__device__ __forceinline__ bool bwd_tile_empty(const BwdParams& p, const BwdTile& t) {
  // Only varlen tiles lie outside their sequence (a dense grid is the call's own). The test is spelled out twice: as
  // a lambda shared by both returns, ptxas scheduled the varlen kernels' tile decode differently (same instructions).
  if constexpr (Cfg::kLocal) {
    const bool unreached = bwd_end_m_block<Cfg>(p, t.seq, t.n_block) <= first_m_block<Cfg>(p, t.seq, t.n_block);
    if constexpr (Cfg::kVarlen) return t.n_block * Cfg::kBlockN >= t.seq.seqlen_k || t.seq.seqlen_q == 0 || unreached;
    return unreached;
  }
  return t.n_block * Cfg::kBlockN >= t.seq.seqlen_k || t.seq.seqlen_q == 0;
}

// The tiles one CTA walks: blockIdx.x, blockIdx.x + gridDim.x, ... With one CTA per tile (grid = num_tiles) that is
// one tile; the persistent launch (grid = SMs) chains them, so a CTA pays its launch, barrier set-up and ring fill
// once, and the next tile's K / V load runs under the current tile's dQ hand-off and dK / dV stores (the producer
// waits on kv_free, not on the CTA's exit). Every role walks the same sequence with its own copy; iter counts the
// tiles done (the parity of the kv / kv_free phases). Causal kernels (kSnake) deal the rounds of G = gridDim.x tiles
// boustrophedon: round k takes tile k * G + (k odd ? G - 1 - blockIdx.x : blockIdx.x), so the CTA that got a round's
// longest key block gets the next round's shortest. The plain deal gives CTA i key block i % 4 every round at 512
// keys (key blocks fastest, 132 CTAs): persistent x one CTA per tile, H200 d128, causal, 512 / 1k / 2k / 4k / 16k,
// 0.73 / 0.76 / 0.87 / 0.98 / 0.69 plain, 1.025 / 1.028 / 1.045 / 1.015 / 0.725 boustrophedon (d64 1.075 / 1.048 /
// 1.031 / 1.019 / 0.968; benchmarks/NOTES.md, s28a; scripts/simulate_bwd_deal.py predicted +5-8% at 512-4k). With
// one CTA per tile round 1 is past the last tile whichever way it is dealt. Varlen kernels skip empty tiles
// (bwd_tile_empty) in every role alike, so there iter (tiles done) and round (tiles dealt) differ.
template <class Cfg>
struct BwdCtaTiles {
  int tile, iter, round;

  __device__ __forceinline__ explicit BwdCtaTiles(const BwdParams& p)
      : tile(static_cast<int>(blockIdx.x)), iter(0), round(0) {
    skip_empty(p);
  }
  __device__ __forceinline__ bool valid(const BwdParams& p) const { return tile < p.num_tiles; }
  __device__ __forceinline__ void advance(const BwdParams& p) {
    deal(Cfg::kSkipsEmptyTiles ? ++round : iter + 1);
    ++iter;
    skip_empty(p);
  }

 private:
  // gridDim.x read where it is used (volatile: not hoisted): held across the producer's tile loop, its 24 registers
  // spilled it (nvcc 13.0, the causal kernels).
  __device__ __forceinline__ void deal(int next_round) {
    uint32_t ctas;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(ctas));
    if (Cfg::kCausal) {
      const int grid = static_cast<int>(ctas), cta = static_cast<int>(blockIdx.x);
      tile = next_round * grid + ((next_round & 1) ? grid - 1 - cta : cta);
    } else {
      tile += static_cast<int>(ctas);
    }
  }
  __device__ __forceinline__ void skip_empty(const BwdParams& p) {
    if constexpr (Cfg::kSkipsEmptyTiles) {
      while (valid(p) && bwd_tile_empty<Cfg>(p, bwd_tile<Cfg>(p, tile))) deal(++round);
    }
  }
};

// BwdConfig::kPublishTiles: the producer publishes each of its CTA's tiles in shared memory (slot iter & 1, and the
// tile once more as `current`), written after the kv_free wait and before the K/V barrier's arrive, which releases
// them with the K/V; after its last tile one slot with valid = 0 (the K/V barrier arrived without bytes). The
// consumers walk the slots instead of dealing and decoding tiles themselves, and read a tile's values where they use
// them: each step's masks (lengths, key block) from `current` (no index: a consumer's last mask of a tile precedes
// its kv_free arrival, after which the producer may rewrite it), the stores after the loop from the tile's slot
// (reused two tiles later, after the consumers' kv_free arrivals of the tile between, which follow this tile's
// stores). Why: the MLA key split's consumers sit at 240 registers with nothing to spare (dense: 0 spills; one step
// counter more spilled 8 B); its varlen form, decoding tiles as every other kernel does, kept the decode's launch
// constants (FastDiv fields, cu_seqlens pointers) and the lengths in registers across the step loop and spilled 44 /
// 76 B (non-causal / causal), some of it reloaded at every step; four other arrangements spilled 48-140 B (nvcc 13.0,
// forty-fourth session; benchmarks/NOTES.md has the steps to 0). d64's and d128's varlen kernels publish for their
// step loops' length (BwdConfig::kPublishTiles). The dQ writer deals and decodes as before.
struct BwdPublishedTile {
  BwdTile t;
  int valid;  // 0: the CTA has no more tiles
};
struct BwdPublished {
  BwdPublishedTile slot[2];
  BwdTile current;
};
static_assert(sizeof(BwdPublished) <= kBwdPublishedBytes, "BwdConfig reserves kBwdPublishedBytes for it");

template <class Cfg>
__device__ __forceinline__ BwdPublished& bwd_published(uint8_t* smem) {
  return *reinterpret_cast<BwdPublished*>(smem + Cfg::kOffPublished);
}

// The producer's end of its tiles (kPublishTiles): the slot after the last tile says none is left.
template <class Cfg>
__device__ __forceinline__ void bwd_publish_end(uint8_t* smem, typename Cfg::Barriers& bars, int iter) {
  if (iter > 0) bars.kv_free.wait_sleeping((iter - 1) & 1);
  bwd_published<Cfg>(smem).slot[iter & 1].valid = 0;
  bars.kv.arrive();
}

// The steps of one CTA: every query head h = kv_head * group + g of its K/V head (g = 0 .. group - 1), each over the
// query blocks [begin, num_m_blocks) (first_m_block does not depend on the head), as one flat sequence of total =
// group * (num_m_blocks - begin) steps. All four loops (producer, dQ writer, both consumers) walk it with the same step
// index, so the ring stages, the dS^T / dQ buffers (step & 1) and every "is there a step + 2" test continue across
// heads. advance() moves to the next step without a division.
template <class Cfg>
struct BwdQueryWalk {
  int begin;    // first query block of every head
  int end;      // num_m_blocks
  int total;    // steps
  int head;     // query head of the current step
  int m_block;  // query block of the current step

  __device__ __forceinline__ BwdQueryWalk(const BwdParams& p, const BwdSeq& seq, int n_block, int kv_head)
      : begin(first_m_block<Cfg>(p, seq, n_block)),
        end(bwd_end_m_block<Cfg>(p, seq, n_block)),
        total(p.group * (end - begin)),
        head(kv_head * p.group),
        m_block(begin) {}

  __device__ __forceinline__ void advance() {
    if (++m_block == end) {
      m_block = begin;
      ++head;
    }
  }
  // The previous step's head and query block (the overlap consumer hands its dQ off one step late); only after at
  // least one advance().
  __device__ __forceinline__ int prev_head() const { return m_block == begin ? head - 1 : head; }
  __device__ __forceinline__ int prev_m_block() const { return m_block == begin ? end - 1 : m_block - 1; }
};

// K and V of a tile into their (single) buffers, once the consumers are past the previous tile's last K/V read
// (iter > 0).
template <class Cfg>
__device__ __forceinline__ void bwd_load_kv(const CUtensorMap* tma_k, const CUtensorMap* tma_v, const BwdTile& t,
                                            int iter, int kv_parts, uint8_t* smem,
                                            typename Cfg::Barriers& bars) {
  const int kv_head = t.kv_head / kv_parts;  // the tile's K/V head is a part's (BwdParams::kv_parts); once per tile
  if (iter > 0) bars.kv_free.wait_sleeping((iter - 1) & 1);
  if constexpr (Cfg::kPublishTiles) {
    BwdPublished& pub = bwd_published<Cfg>(smem);
    pub.slot[iter & 1] = BwdPublishedTile{t, 1};
    pub.current = t;
  }
  bars.kv.arrive_expect_tx(Cfg::kKBytes + Cfg::kVBytes);
#pragma unroll
  for (int panel = 0; panel < Cfg::kPanels; ++panel) {
    tma_load_4d(tma_k, &bars.kv, smem + panel * Cfg::kKVPanelBytes, panel * kPanelCols,
                t.seq.k_row0 + t.n_block * Cfg::kBlockN, kv_head, t.seq.tma_batch);
    if (panel < Cfg::kPanelsV)
      tma_load_4d(tma_v, &bars.kv, smem + Cfg::kOffV + panel * Cfg::kKVPanelBytes, panel * kPanelCols,
                  t.seq.k_row0 + t.n_block * Cfg::kBlockN, kv_head, t.seq.tma_batch);
  }
}

// Per tile: K/V (from the second tile on after kv_free, i.e. after the previous tile's last dQ GEMM), then per step
// Q / dO / lse_log2 / delta into the ring, which runs on across tiles: the next tile's K/V and first stages load
// while the consumers hand off their last dQ and store dK / dV.
template <class Cfg>
__device__ __forceinline__ void bwd_producer(const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                                             const CUtensorMap* tma_v, const CUtensorMap* tma_do, const BwdParams& p,
                                             uint8_t* smem, typename Cfg::Barriers& bars) {
  tma_prefetch_descriptor(tma_q);
  tma_prefetch_descriptor(tma_k);
  tma_prefetch_descriptor(tma_v);
  tma_prefetch_descriptor(tma_do);
  PipelineState<Cfg::kStages> st;
  BwdCtaTiles<Cfg> tiles(p);
  for (; tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    bwd_load_kv<Cfg>(tma_k, tma_v, t, tiles.iter, p.kv_parts, smem, bars);
    BwdQueryWalk<Cfg> walk(p, t.seq, t.n_block, t.kv_head);
    // Counted down: one register fewer than step < total under the producer's 24 (the causal kernels spilled).
    for (int left = walk.total; left > 0; --left, walk.advance()) {
      const int m_block = walk.m_block, head = walk.head;
      bars.qdo.producer_acquire(st, Cfg::kStageBytes);
      MBarrier* full = bars.qdo.full_barrier(st);
      uint8_t* q_dst = smem + Cfg::kOffQ + st.index * Cfg::kQBytes;
      uint8_t* do_dst = smem + Cfg::kOffDO + st.index * Cfg::kDOBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel) {
        tma_load_4d(tma_q, full, q_dst + panel * Cfg::kQPanelBytes, panel * kPanelCols,
                    t.seq.q_row0 + m_block * Cfg::kBlockM, head, t.seq.tma_batch);
        if (panel < Cfg::kPanelsV)
          tma_load_4d(tma_do, full, do_dst + panel * Cfg::kQPanelBytes, panel * kPanelCols,
                      t.seq.q_row0 + m_block * Cfg::kBlockM, head, t.seq.tma_batch);
      }
      const int64_t row = ws_row_index(t.seq, p.nheads, p.seqlen_q_rounded, head, m_block * Cfg::kBlockM);
      bulk_load(smem + Cfg::kOffLse + st.index * Cfg::kRowStatBytes, p.lse_log2 + row, Cfg::kRowStatBytes, full);
      bulk_load(smem + Cfg::kOffDelta + st.index * Cfg::kRowStatBytes, p.delta + row, Cfg::kRowStatBytes, full);
      st.advance();
    }
  }
  if constexpr (Cfg::kPublishTiles) bwd_publish_end<Cfg>(smem, bars, tiles.iter);
}

// Bulk dQ: warp 1 of the producer warpgroup. Per step (the consumers' order: BwdQueryWalk over each of the CTA's
// tiles, steps numbered across tiles), wait until both consumers have staged and fenced this buffer's dQ tile(s), add
// every 64 x 32 panel into dq_accum with one TMA reduce-add, wait until the reduces have read the buffer, and free it
// for the consumers' step + kDQBuffers (the empty arrive is skipped when no such step exists, so no barrier is left
// half-arrived: the CTA's step count is summed first). The whole warp runs the barriers (bar.sync/bar.arrive are
// .aligned); one lane issues. Before exit the writes themselves are waited for, so none outlives the shared memory.
template <class Cfg>
__device__ __forceinline__ void bwd_dq_writer(const CUtensorMap* tma_dq, const BwdParams& p, uint8_t* smem) {
  const bool issuer = elect_one();
  if (issuer) tma_prefetch_descriptor(tma_dq);
  int cta_steps = 0;
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    cta_steps += BwdQueryWalk<Cfg>(p, t.seq, t.n_block, t.kv_head).total;
  }
  // The MLA key split's consumers wait for the empty barrier at every step, the CTA's first too
  // (flash_bwd_mla_keys.cuh): one arrival ahead for it.
  if (Cfg::kMlaKeySplit && cta_steps > 0) NamedBarrier::arrive(Cfg::kDQEmptyBarrier, Cfg::kDQBarrierThreads);
  int step = 0;  // across tiles
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    BwdQueryWalk<Cfg> walk(p, t.seq, t.n_block, t.kv_head);
    for (int i = 0; i < walk.total; ++i, ++step, walk.advance()) {
      const int buffer = step & (Cfg::kDQBuffers - 1);  // step % kDQBuffers; a signed % or a helper changed SASS
      NamedBarrier::sync(Cfg::kDQFullBarrier + buffer, Cfg::kDQBarrierThreads);
      if (issuer) {
        const uint8_t* stage = smem + Cfg::kOffDQ + buffer * Cfg::kDQStageBytes;
#pragma unroll
        for (int tile = 0; tile < Cfg::kDQTiles; ++tile) {
          const int row =
              t.seq.ws_row0 + walk.m_block * Cfg::kBlockM + (Cfg::kDQSplitRows ? tile * Cfg::kDQTileRows : 0);
#pragma unroll
          for (int panel = 0; panel < Cfg::kDQTilePanels; ++panel)
            tma_reduce_add_4d(tma_dq, stage + tile * Cfg::kDQTileBytes + panel * Cfg::kDQPanelBytes,
                              panel * Cfg::kDQPanelCols, row, walk.head, t.seq.tma_batch);
        }
        tma_store_commit();
        tma_store_wait_read<0>();
      }
      __syncwarp();
      if (step + Cfg::kDQBuffers < cta_steps)
        NamedBarrier::arrive(Cfg::kDQEmptyBarrier + buffer, Cfg::kDQBarrierThreads);
    }
  }
  if (issuer) tma_store_wait<0>();
}

// MBarrier::wait for the consumer's m loop. Same hang guard, but the trap is followed by a `break`, so the loop keeps
// a normal exit edge: with MBarrier::wait's `__trap()` (no return) inside the loop that carries the dK/dV accumulators,
// ptxas serialized every wgmma (C7512) and spilled 516 B at d128 (measured, nvcc 13.0); with trap + break, 0 spills.
// The break is never reached: trap ends the kernel.
__device__ __forceinline__ void wait_in_loop(MBarrier& bar, uint32_t parity) {
#ifdef FA3NN_HANG_GUARD
  uint32_t polls = 0;
  while (!bar.try_wait(parity)) {
    if (++polls == (1u << 30)) {
      asm volatile("trap;");
      break;
    }
  }
#else
  bar.wait(parity);
#endif
}

// The consumers' walk over the published tiles (the interface of BwdCtaTiles they use). valid() waits for the
// tile's K/V phase, which publishes the slot. Reads go through 32-bit shared addresses (ld.shared): the generic
// pointer to the slots, 64 bits held across the step loop, spilled with the tile count (80 B causal).
template <class Cfg>
struct BwdPublishedTiles {
  int iter = 0;

  __device__ __forceinline__ explicit BwdPublishedTiles(const BwdParams&) {}
  __device__ __forceinline__ bool valid(const BwdParams&) const {
    uint8_t* smem = aligned_dynamic_smem();
    wait_in_loop(reinterpret_cast<typename Cfg::Barriers*>(smem + Cfg::kOffBarriers)->kv, iter & 1);
    return read(smem_addr(smem), slot_field(offsetof(BwdPublishedTile, valid))) != 0;
  }
  __device__ __forceinline__ void advance(const BwdParams&) { ++iter; }
  __device__ __forceinline__ BwdTile tile() const {
    const uint32_t base = smem_addr(aligned_dynamic_smem());
    const auto field = [&](uint32_t offset) { return read(base, slot_field(offsetof(BwdPublishedTile, t) + offset)); };
    return BwdTile{field(offsetof(BwdTile, n_block)), field(offsetof(BwdTile, kv_head)), field(offsetof(BwdTile, batch)),
                   BwdSeq{field(offsetof(BwdTile, seq) + offsetof(BwdSeq, seqlen_q)),
                          field(offsetof(BwdTile, seq) + offsetof(BwdSeq, seqlen_k)),
                          field(offsetof(BwdTile, seq) + offsetof(BwdSeq, q_row0)),
                          field(offsetof(BwdTile, seq) + offsetof(BwdSeq, k_row0)),
                          field(offsetof(BwdTile, seq) + offsetof(BwdSeq, ws_row0)),
                          field(offsetof(BwdTile, seq) + offsetof(BwdSeq, tma_batch))}};
  }
  // The key block and lengths for a step's masks (BwdPublished::current; the masks read no other field, the rest
  // is 0). base: smem_addr of the aligned shared memory, which the consumers hold anyway.
  __device__ __forceinline__ static BwdTile tile_in_step(uint32_t base) {
    constexpr uint32_t current = offsetof(BwdPublished, current), seq = current + offsetof(BwdTile, seq);
    return BwdTile{read(base, current + offsetof(BwdTile, n_block)), 0, 0,
                   BwdSeq{read(base, seq + offsetof(BwdSeq, seqlen_q)), read(base, seq + offsetof(BwdSeq, seqlen_k)),
                          0, 0, 0, 0}};
  }

 private:
  __device__ __forceinline__ uint32_t slot_field(uint32_t offset) const {
    return offsetof(BwdPublished, slot) + (iter & 1) * sizeof(BwdPublishedTile) + offset;
  }
  __device__ __forceinline__ static int read(uint32_t base, uint32_t offset) {
    return static_cast<int>(ld_shared_b32(base + Cfg::kOffPublished + offset));
  }
};

// The tile a consumer's walk is at: decoded (BwdCtaTiles) or published (BwdPublishedTiles).
template <class Cfg>
__device__ __forceinline__ BwdTile bwd_tile_at(const BwdParams& p, const BwdCtaTiles<Cfg>& tiles) {
  return bwd_tile<Cfg>(p, tiles.tile);
}
template <class Cfg>
__device__ __forceinline__ BwdTile bwd_tile_at(const BwdParams&, const BwdPublishedTiles<Cfg>& tiles) {
  return tiles.tile();
}

// fence_operands over the k-steps of a 64 x 16K A operand held in registers.
template <int K>
__device__ __forceinline__ void fence_fragments(uint32_t (&a)[K][4]) {
#pragma unroll
  for (int k = 0; k < K; ++k) fence_operands(a[k]);
}

template <class Cfg>
struct BwdStage;  // one ring stage's operands (below)

template <class Cfg>
struct BwdConsumer {
  // S^T / dP^T of one warpgroup: its 64 keys x all kBlockM queries, or (kColSplit) all 64 keys x half the queries.
  static constexpr int kSQueries = Cfg::kColSplit ? Cfg::kBlockM / 2 : Cfg::kBlockM;
  static constexpr int kSRegs = kSQueries / 2;
  static constexpr int kKSteps = kSQueries / 16;  // k16 steps of P^T / dS^T as an A operand (queries)
  static constexpr int kAccCols = Cfg::kColSplit ? Cfg::kHeadDim / 2 : Cfg::kHeadDim;  // dK, dV: 64 keys x these
  static constexpr int kAccRegs = kAccCols / 2;
  static constexpr int kDQRegs = Cfg::kDQCols / 2;
  static constexpr uint32_t kDSBarrierThreads = 2 * 128;

  int wg;   // 0 or 1: keys [64 wg, 64 wg + 64) of the block (kColSplit: columns and S^T queries, see BwdConfig)
  int tid;  // 0..127
  bool leader;

  // This warpgroup's first key of the block, first query of its S^T columns, first dK / dV column.
  __device__ __forceinline__ int key_base() const { return Cfg::kColSplit ? 0 : wg * 64; }
  __device__ __forceinline__ int query_base() const { return Cfg::kColSplit ? wg * kSQueries : 0; }
  __device__ __forceinline__ int col_base() const {
    static_assert(!Cfg::kPanelSplit, "the MLA consumer's columns are its panels' (flash_bwd_mla.cuh MlaPanels)");
    return Cfg::kColSplit ? wg * kAccCols : 0;
  }

  __device__ __forceinline__ int row_in_warpgroup(int half) const { return (tid / 32) * 16 + (tid % 32) / 4 + 8 * half; }
  // Accumulator element i sits at row r0 + 8 * ((i >> 1) & 1), column 8 * (i >> 2) + 2 * (tid % 4) + (i & 1).
  __device__ __forceinline__ int col_of(int i) const { return 8 * (i >> 2) + 2 * (tid % 4) + (i & 1); }

  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return pack_16x2<Cfg::kBF16>(lo, hi); }

  // Rows are keys, columns queries. Masked: keys past seqlen_k, (causal) keys above the query's diagonal, (kLocal)
  // keys outside the query's window.
  __device__ __forceinline__ void apply_mask(float (&s)[kSRegs], const BwdParams& p, const BwdSeq& seq, int m_block,
                                            int n_block) const {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = n_block * Cfg::kBlockN + key_base() + row_in_warpgroup(half);
#pragma unroll
      for (int i = 0; i < kSRegs; ++i) {
        if (((i >> 1) & 1) != half) continue;
        const int query = m_block * Cfg::kBlockM + query_base() + col_of(i);
        bool masked = key >= seq.seqlen_k;
        if constexpr (Cfg::kCausal) masked |= key > query + seq.seqlen_k - seq.seqlen_q;
        if constexpr (Cfg::kLocal) {
          const int diag = query + seq.seqlen_k - seq.seqlen_q;
          masked |= (p.window_right >= 0 && key > diag + p.window_right) ||
                    (p.window_left >= 0 && key < diag - p.window_left);
        }
        if (masked) s[i] = -INFINITY;
      }
    }
  }

  // The per-query statistic (lse_log2 or delta) of this thread's columns 8j + 2 (tid % 4), +1, as LDS.64 where it is
  // used. The row statistics and dS^T (write_ds) go through explicit LDS / STS on 32-bit shared addresses
  // (shared_store.cuh), not C++ accesses through the generic `smem` pointer (LD.E / ST.E on 64-bit addresses, 16
  // address pairs for dS^T alone): m128 spilled 144-152 B with generic accesses, 24-32 B with LDS statistics, 0 with
  // both; the d128 default went 1970 -> 1914 instructions and ran 1.09-1.12x faster in the same run (H200,
  // benchmarks/NOTES.md "Explicit shared-memory accesses in the backward").
  __device__ __forceinline__ float2 stat_pair(const float* stat, int j) const {
    return ld_shared_v2(smem_addr(stat + query_base() + 8 * j + 2 * (tid % 4)));
  }

  // P^T in place of S^T: exp2(S^T * scale_log2 - lse_log2[query]); the per-query statistics are pairs of adjacent
  // columns, read as float2 from this stage's shared-memory copy.
  // fast_exp2 (ex2.approx.ftz, the forward's and softcap_dscores'): exp2f's subnormal handling cost three more
  // instructions per score (FSETP and two predicated FMULs around MUFU.EX2: 96 per thread and step at d128, in the
  // phase where MUFU is busiest); the probabilities it flushes to 0 are below 2^-126. Whole backward, H100 s42c: d128
  // 1.026-1.065x at 2k / 16k, d64 / d256 / MLA within -1.1 / +2.7% (benchmarks/NOTES.md "forty-second session").
  __device__ __forceinline__ void probs(float (&s)[kSRegs], const float* lse_log2, float scale_log2) const {
#pragma unroll
    for (int j = 0; j < kSRegs / 4; ++j) {
      const float2 l = stat_pair(lse_log2, j);
      s[4 * j + 0] = fast_exp2(s[4 * j + 0] * scale_log2 - l.x);
      s[4 * j + 1] = fast_exp2(s[4 * j + 1] * scale_log2 - l.y);
      s[4 * j + 2] = fast_exp2(s[4 * j + 2] * scale_log2 - l.x);
      s[4 * j + 3] = fast_exp2(s[4 * j + 3] * scale_log2 - l.y);
    }
  }

  // P^T in place of S^T, the mask applied first where the block needs it (bwd_block_needs_mask). kSoftcap: the capped
  // scores t = tanh(S^T * softcap_pre), the forward's softcap_scores (so P^T matches the forward's lse), masked to
  // -inf; P^T comes later, with dS^T (softcap_dscores).
  __device__ __forceinline__ void masked_probs(float (&s)[kSRegs], const BwdParams& p, const BwdSeq& seq,
                                               const float* lse_log2, int m_block, int n_block) const {
    if constexpr (Cfg::kSoftcap) softcap_scores<tanh_poly_pays(Cfg::kHeadDim)>(s, p.softcap_pre);
    if (bwd_block_needs_mask<Cfg>(p, seq, m_block, n_block)) apply_mask(s, p, seq, m_block, n_block);
    if constexpr (!Cfg::kSoftcap) probs(s, lse_log2, p.scale_log2);
  }

  // kSoftcap: from the capped scores t (masked: -inf) in s, P^T = exp2(t * scale_log2 - lse_log2[query]) in place of
  // t, and dS^T = P^T * (dP^T - delta[query]) * (1 - t^2) in place of dP^T (d(cap tanh(x / cap)) / dx = 1 - t^2;
  // softmax_scale is applied to dK / dQ afterwards, as without the cap). max(1 - t^2, 0) is 0 at a masked t (1 - inf
  // would make 0 * -inf = NaN) and leaves every other t, |t| <= 1, as it is. Holding t rather than P^T and a second
  // array for 1 - t^2 keeps the plain kernels' registers (kSRegs more would spill at d128, 224 of 240 live). In place,
  // in this order, and with fast_exp2 (the forward's; exp2f's subnormal handling took two registers more): P^T
  // computed first with t kept for 1 - t^2 spilled 40-72 B in the d64 m128 kernels, exp2f 8 B in d64's varlen
  // window kernel (232 registers; nvcc 13.0).
  __device__ __forceinline__ void softcap_dscores(float (&dp)[kSRegs], float (&s)[kSRegs], const float* lse_log2,
                                                  const float* delta, float scale_log2) const {
#pragma unroll
    for (int j = 0; j < kSRegs / 4; ++j) {
      const float2 l = stat_pair(lse_log2, j), d = stat_pair(delta, j);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * j + e;
        const float t = s[i];
        dp[i] = (dp[i] - ((e & 1) ? d.y : d.x)) * fmaxf(fmaf(-t, t, 1.f), 0.f);
        s[i] = fast_exp2(t * scale_log2 - ((e & 1) ? l.y : l.x));
        dp[i] *= s[i];
      }
    }
  }

  // dS^T in place of dP^T: P^T * (dP^T - delta[query]).
  __device__ __forceinline__ void dscores(float (&dp)[kSRegs], const float (&pt)[kSRegs], const float* delta) const {
#pragma unroll
    for (int j = 0; j < kSRegs / 4; ++j) {
      const float2 d = stat_pair(delta, j);
      dp[4 * j + 0] = pt[4 * j + 0] * (dp[4 * j + 0] - d.x);
      dp[4 * j + 1] = pt[4 * j + 1] * (dp[4 * j + 1] - d.y);
      dp[4 * j + 2] = pt[4 * j + 2] * (dp[4 * j + 2] - d.x);
      dp[4 * j + 3] = pt[4 * j + 3] * (dp[4 * j + 3] - d.y);
    }
  }

  // A 64 x kBlockM accumulator as the A operand of m64nNk16 (k-steps of 16 queries): the accumulator layout of a
  // 64 x 16 slice is the A-fragment layout, so no shuffles (HOPPER_PRIMER.md section 2).
  __device__ __forceinline__ static void to_a_fragments(const float (&s)[kSRegs], uint32_t (&a)[kKSteps][4]) {
#pragma unroll
    for (int k = 0; k < kKSteps; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[k][j] = pack(s[8 * k + 2 * j], s[8 * k + 2 * j + 1]);
  }

  // dS^T in place of dP^T, packed into its A fragments (dP^T dies here). kSoftcap: s holds the capped scores and
  // becomes P^T here (softcap_dscores); otherwise it already is P^T.
  __device__ __forceinline__ void ds_fragments(float (&dp)[kSRegs], float (&s)[kSRegs], const BwdStage<Cfg>& stage,
                                               float scale_log2, uint32_t (&dsa)[kKSteps][4]) const {
    if constexpr (Cfg::kSoftcap) {
      softcap_dscores(dp, s, stage.lse_log2, stage.delta, scale_log2);
    } else {
      dscores(dp, s, stage.delta);
    }
    to_a_fragments(dp, dsa);
    fence_fragments(dsa);
  }

  // dS^T (this warpgroup's 64 key rows, 16-bit, as packed in the A fragments) into the SW128 panels of `ds` (64
  // queries each): element (key, query) at byte (query / 64) * kDSPanelBytes + key * 128 + (((query % 64) / 8) ^
  // (key % 8)) * 16 + (query % 8) * 2, the layout a wgmma descriptor reads with 128B swizzle. Fragment a[k][j] holds
  // columns 16k + 8(j/2) + 2q (+1) of row r0 + 8 (j % 2). kColSplit: all 64 key rows, this warpgroup's queries; P^T
  // goes to its own buffer the same way.
  __device__ __forceinline__ void write_ds(uint8_t* ds, const uint32_t (&a)[kKSteps][4]) const {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = key_base() + row_in_warpgroup(half);
      uint8_t* row = ds + key * kPanelRowBytes + 4 * (tid % 4);
#pragma unroll
      for (int k = 0; k < kKSteps; ++k)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int chunk = query_base() / 8 + 2 * k + hi;  // 8-query chunk
          st_shared_b32(smem_addr(row + (chunk / 8) * Cfg::kDSPanelBytes + (((chunk % 8) ^ (key % 8)) << 4)),
                        a[k][2 * hi + half]);
        }
    }
  }

  // dQ (64 queries x kDQCols, fp32) added into dq_accum with vector reductions (red.global.add.v2.f32).
  __device__ __forceinline__ void reduce_dq(const BwdParams& p, const BwdSeq& seq, int head, int m_block,
                                            const float (&dq)[kDQRegs]) const {
    static_assert(!Cfg::kPanelSplit, "kDQCols / col offsets do not describe the MLA panels (flash_bwd_mla.cuh)");
    const int col0 = Cfg::kDQSplitKeys ? 0 : wg * Cfg::kDQCols;
    float* base =
        p.dq_accum + ws_row_index(seq, p.nheads, p.seqlen_q_rounded, head, m_block * Cfg::kBlockM) * Cfg::kHeadDim +
        col0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* row = base + row_in_warpgroup(half) * Cfg::kHeadDim + 2 * (tid % 4);
#pragma unroll
      for (int j = 0; j < kDQRegs / 4; ++j) red_add_v2(row + 8 * j, dq[4 * j + 2 * half], dq[4 * j + 2 * half + 1]);
    }
  }

  // Bulk dQ: the same fragment into this warpgroup's part of the fp32 staging tile, as a 128B-swizzled TMA box of
  // 64 rows x 32 columns per 8 KB panel reads it (store_dq_slabs). st.shared (STS.64) on the 32-bit shared address,
  // not a C++ store through the generic pointer (ST.E.64).
  __device__ __forceinline__ void stage_dq(uint8_t* stage, const float (&dq)[kDQRegs]) const {
    static_assert(!Cfg::kPanelSplit, "kDQCols / col offsets do not describe the MLA panels (flash_bwd_mla.cuh)");
    const uint32_t tile = smem_addr(stage) + (Cfg::kDQTiles > 1 ? wg * Cfg::kDQTileBytes : 0);
    const int panel0 = Cfg::kDQTiles > 1 ? 0 : wg * Cfg::kDQCols / Cfg::kDQPanelCols;
    store_dq_slabs<true>(dq, [&](int panel) { return tile + (panel0 + panel) * Cfg::kDQPanelBytes; });
  }

  // An fp32 accumulator's 8-column slabs (slab j: columns 8j + 2q, +1 of this thread's two rows, q = tid % 4) into
  // 64 x 32 fp32 panels, 4 slabs a panel starting at panel_addr(j / 4), as a 128B-swizzled TMA box reads them:
  // element (row, col) at row * 128 + (((col % 32) / 4) ^ (row % 8)) * 16 + (col % 4) * 4. STS.64 runs a warp as two
  // half-warps of 16 lanes (rows r0 .. r0 + 3, q 0-3); storing slab j from every lane puts a half-warp's 8 float2 on
  // 4 of the 8 16-B chunks (chunk 2 (j % 4) + q / 2 XOR row % 8: q / 2 flips the bit that rows 0-3 flip too), 4
  // wavefronts a store against 2 (Nsight Compute, d128 and MLA, H200, s39d). kSpread: lanes with q / 2 = 1 store
  // slab j ^ 2 (chunk bit 2 flipped, which rows r0 .. r0 + 3 leave alone) while the others store slab j, so the 16
  // lanes hit 8 distinct chunks, 2 wavefronts; a select per value picks the registers. Measured (H200, s39e, same
  // run): d64 1.01-1.04x, d128 1.02-1.04x, MLA 1.02-1.07x; d256's ring staging 0.88-0.97x (cause not found), so
  // stage_dq_ring keeps every lane on slab j.
  template <bool kSpread, int kRegs, class PanelAddr>
  __device__ __forceinline__ void store_dq_slabs(const float (&dq)[kRegs], PanelAddr panel_addr) const {
    static_assert(kRegs % 16 == 0, "whole 32-column panels (4 slabs of 4 registers)");
    const bool upper = kSpread && (tid & 2) != 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_in_warpgroup(half);
#pragma unroll
      for (int n = 0; n < kRegs / 4; ++n) {
        const int alt = n ^ 2;  // the same panel's other slab pair
        const int i = 4 * n + 2 * half, k = 4 * alt + 2 * half;
        st_shared_v2(panel_addr(n / 4) + dq_panel_byte(row, upper ? alt : n), upper ? dq[k] : dq[i],
                     upper ? dq[k + 1] : dq[i + 1]);
      }
    }
  }

  // Byte of this thread's dQ columns 8j + 2q, +1 in their 64 x 32 fp32 panel (j / 4), at `row`: in-panel column
  // 8 (j % 4) + 2q, 16-B chunk 2 (j % 4) + q / 2 swizzled with row % 8 (store_dq_slabs' layout).
  __device__ __forceinline__ uint32_t dq_panel_byte(int row, int j) const {
    const int chunk = 2 * (j % 4) + (tid % 4) / 2;
    return row * 128 + ((chunk ^ (row % 8)) << 4) + 8 * (tid % 2);
  }

  // kDQInRing: this warpgroup's dQ (64 x 128 fp32) into the ring stage `index` as stage_dq lays out a tile, panel j
  // at ring_dq_panel (flash_bwd_cols.cuh).
  __device__ __forceinline__ void stage_dq_ring(uint32_t base, uint32_t index, const float (&dq)[kDQRegs]) const;

  // dK or dV rows of this warpgroup (times `scale`) from registers; keys past seqlen_k skipped. With `vec16` (dst
  // 16-B aligned, strides multiples of 8 elements: BwdParams::dkdv_vec16) each quad transposes its words
  // (quad_transpose) so that every store is 16 contiguous bytes: a warp store then covers 8 rows x 64 B, whole 32-B
  // sectors, against 8 rows x 16 B (half sectors) for the 4-byte stores, with a quarter of the store instructions.
  // The 4-byte form took ~7.8 us per tile at d128 (64 KB of dK / dV per CTA; scripts/bwd_trace.py, s27c), a third of
  // a 512-key tile's time.
  // col0: the first column of acc (col_base(); multi-head latent attention's panels, flash_bwd_mla.cuh).
  // f32 (BwdParams::dkdv_f32, GQA in parts): fp32 rows (a partial sum), 8 bytes at a time, whatever vec16 says.
  template <int kRegs>
  __device__ __forceinline__ void store_rows(void* dst, int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                                             const BwdSeq& seq, int head, int n_block, const float (&acc)[kRegs],
                                             float scale, bool vec16, int col0, bool f32) const {
    if (f32) {
      float* out = static_cast<float*>(dst) + seq.tma_batch * batch_stride + head * head_stride + col0;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = n_block * Cfg::kBlockN + key_base() + row_in_warpgroup(half);
        if (key >= seq.seqlen_k) continue;
        float* out_row = out + static_cast<int64_t>(seq.k_row0 + key) * row_stride;
#pragma unroll
        for (int j = 0; j < kRegs / 4; ++j) {
          const int i = 4 * j + 2 * half;
          *reinterpret_cast<float2*>(out_row + 8 * j + 2 * (tid % 4)) = make_float2(acc[i] * scale, acc[i + 1] * scale);
        }
      }
      return;
    }
    uint16_t* out = static_cast<uint16_t*>(dst) + seq.tma_batch * batch_stride + head * head_stride + col0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = n_block * Cfg::kBlockN + key_base() + row_in_warpgroup(half);
      const bool row_ok = key < seq.seqlen_k;
      uint16_t* out_row = out + static_cast<int64_t>(seq.k_row0 + key) * row_stride;
      if (vec16) {
        // Every lane shuffles (the quad's row is valid or not as a whole; the warp's shuffles need all lanes).
#pragma unroll
        for (int k = 0; k < kRegs / 16; ++k) {
          uint32_t w[4];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int i = 4 * (4 * k + c) + 2 * half;
            w[c] = pack(acc[i] * scale, acc[i + 1] * scale);
          }
          quad_transpose(w);
          if (row_ok) st_global_16(out_row + 8 * (4 * k + tid % 4), make_uint4(w[0], w[1], w[2], w[3]));
        }
      } else if (row_ok) {
#pragma unroll
        for (int j = 0; j < kRegs / 4; ++j) {
          const int i = 4 * j + 2 * half;
          *reinterpret_cast<uint32_t*>(out_row + 8 * j + 2 * (tid % 4)) = pack(acc[i] * scale, acc[i + 1] * scale);
        }
      }
    }
  }
};

// The pieces both consumers (bwd_consumer here, bwd_consumer_overlap in flash_bwd_overlap.cuh) share: one ring
// stage's operands, the score GEMMs, the dQ hand-off.
template <class Cfg>
struct BwdStage {
  uint32_t q_smem, do_smem;
  const float *lse_log2, *delta;

  __device__ __forceinline__ BwdStage(uint8_t* smem, uint32_t base, uint32_t index)
      : q_smem(base + Cfg::kOffQ + index * Cfg::kQBytes),
        do_smem(base + Cfg::kOffDO + index * Cfg::kDOBytes),
        lse_log2(reinterpret_cast<const float*>(smem + Cfg::kOffLse + index * Cfg::kRowStatBytes)),
        delta(reinterpret_cast<const float*>(smem + Cfg::kOffDelta + index * Cfg::kRowStatBytes)) {}
};

// S^T = K_c Q^T (one commit group), and with kWithDP dP^T = V_c dO^T (a second group). kColSplit: all keys, the
// warpgroup's query rows of Q / dO (query_rows bytes into each panel).
template <class Cfg, bool kWithDP>
__device__ __forceinline__ void bwd_issue_scores(float (&s)[BwdConsumer<Cfg>::kSRegs],
                                                 float (&dp)[BwdConsumer<Cfg>::kSRegs], uint64_t desc_k_rows,
                                                 uint64_t desc_v_rows, const BwdStage<Cfg>& stage,
                                                 uint32_t query_rows = 0) {
  constexpr int N = BwdConsumer<Cfg>::kSQueries;
  warpgroup_arrive();
  gemm_ss<N, Cfg::kHeadDim, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
      s, desc_k_rows, make_desc_kmajor_sw128(stage.q_smem + query_rows));
  wgmma_commit();
  if constexpr (kWithDP) {
    gemm_ss<N, Cfg::kHeadDimV, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
        dp, desc_v_rows, make_desc_kmajor_sw128(stage.do_smem + query_rows));
    wgmma_commit();
  }
}

// dQ of step `step` (query block m_block), already waited for, into dq_accum: red.global.add, or (bulk) the staging
// tile of buffer step % kDQBuffers, last read by step - kDQBuffers's reduces, under the dQ writer's full/empty
// barriers.
template <class Cfg>
__device__ __forceinline__ void bwd_hand_off_dq(const BwdConsumer<Cfg>& c, const BwdParams& p, uint8_t* smem,
                                                const BwdSeq& seq, int head, int m_block, int step,
                                                const float (&dq)[BwdConsumer<Cfg>::kDQRegs]) {
  if constexpr (Cfg::kDQBulk) {
    const int buffer = step & (Cfg::kDQBuffers - 1);  // step % kDQBuffers; a signed % or a helper changed SASS
    if (step >= Cfg::kDQBuffers) NamedBarrier::sync(Cfg::kDQEmptyBarrier + buffer, Cfg::kDQBarrierThreads);
    c.stage_dq(smem + Cfg::kOffDQ + buffer * Cfg::kDQStageBytes, dq);
    fence_proxy_async_smem();
    NamedBarrier::arrive(Cfg::kDQFullBarrier + buffer, Cfg::kDQBarrierThreads);
  } else {
    c.reduce_dq(p, seq, head, m_block, dq);
  }
}

// A consumer warpgroup's fixed shared-memory operands: its 64 key rows of K and V as the A operand (K-major) of S^T
// and dP^T, and K as dQ's B operand read N-major (keys are the reduction dimension; column split: the warpgroup's
// kDQCols / 64 panels, all keys; key split: this warpgroup's 64 keys of the single panel; row split: the single
// panel, all 128 keys). kColSplit: all 64 keys are every warpgroup's rows.
template <class Cfg>
struct BwdKVDescs {
  static constexpr int kKeyBase = Cfg::kColSplit ? 0 : 64;  // rows of warpgroup wg start at kKeyBase * wg
  uint64_t k_rows, v_rows, k_dq;

  __device__ __forceinline__ BwdKVDescs(uint32_t base, int wg)
      : k_rows(make_desc_kmajor_sw128(base + wg * kKeyBase * kPanelRowBytes)),
        v_rows(make_desc_kmajor_sw128(base + Cfg::kOffV + wg * kKeyBase * kPanelRowBytes)),
        k_dq(Cfg::kDQSplitKeys   ? make_desc_mnmajor_sw128(base + wg * 64 * kPanelRowBytes, Cfg::kKVPanelBytes)
             : Cfg::kDQSplitRows ? make_desc_mnmajor_sw128(base, Cfg::kKVPanelBytes)
                                 : make_desc_mnmajor_sw128(base + wg * (Cfg::kDQCols / kPanelCols) * Cfg::kKVPanelBytes,
                                                           Cfg::kKVPanelBytes)) {}
};

// dQ = dS K into dq (not committed): A = dS^T at ds_smem (a shared address) read M-major (queries contiguous; column
// split: both warpgroups' key rows; key split: this one's; row split: both warpgroups' key rows of query panel wg),
// k-steps of 16 keys = 16 rows of 128 B.
template <class Cfg>
__device__ __forceinline__ void bwd_issue_dq(float (&dq)[BwdConsumer<Cfg>::kDQRegs], uint32_t ds_smem, int wg,
                                             uint64_t desc_k_dq) {
  static_assert(!Cfg::kPanelSplit, "kDQCols does not describe the MLA panels (flash_bwd_mla.cuh)");
  const uint32_t ds_rows = ds_smem + (Cfg::kDQSplitKeys   ? wg * 64 * kPanelRowBytes
                                      : Cfg::kDQSplitRows ? wg * Cfg::kDSPanelBytes
                                                          : 0);
  const uint64_t desc_ds = make_desc_mnmajor_sw128(ds_rows, Cfg::kDSPanelBytes);
  warpgroup_arrive();
#pragma unroll
  for (int k = 0; k < Cfg::kDQKeys / 16; ++k)
    WgmmaSSMN<Cfg::kDQCols, Cfg::kBF16>::mma(dq, desc_advance(desc_ds, k * 16 * kPanelRowBytes),
                                             desc_advance(desc_k_dq, k * 16 * kPanelRowBytes), k > 0 ? 1 : 0);
}

// acc += A B^T over the stage's queries for dV (A = P^T, B = dO) and dK (A = dS^T, B = Q): A from registers, B
// (queries x d) read N-major from `operand` (the stage's do_smem / q_smem). Not fenced, not committed.
template <class Cfg>
__device__ __forceinline__ void bwd_issue_rs_over_queries(float (&acc)[BwdConsumer<Cfg>::kAccRegs],
                                                          const uint32_t (&a)[BwdConsumer<Cfg>::kKSteps][4],
                                                          uint32_t operand) {
  gemm_rs<Cfg::kBlockM, Cfg::kHeadDim, Cfg::kBF16>(acc, a, make_desc_mnmajor_sw128(operand, Cfg::kQPanelBytes));
}

// dV += P^T dO and dK += dS^T Q (one commit group).
template <class Cfg>
__device__ __forceinline__ void bwd_issue_dkdv(float (&dk)[BwdConsumer<Cfg>::kAccRegs],
                                               float (&dv)[BwdConsumer<Cfg>::kAccRegs],
                                               const uint32_t (&pa)[BwdConsumer<Cfg>::kKSteps][4],
                                               const uint32_t (&dsa)[BwdConsumer<Cfg>::kKSteps][4],
                                               const BwdStage<Cfg>& stage) {
  warpgroup_arrive();
  bwd_issue_rs_over_queries<Cfg>(dv, pa, stage.do_smem);
  bwd_issue_rs_over_queries<Cfg>(dk, dsa, stage.q_smem);
  wgmma_commit();
}

// This step's dS^T visible to the async proxy (dQ's wgmma reads it), then the rows dQ reads written: with the column
// and row splits both warpgroups' (one 256-thread barrier), with the key split this warpgroup's own.
template <class Cfg>
__device__ __forceinline__ void bwd_sync_ds(int wg) {
  fence_proxy_async_smem();
  if constexpr (Cfg::kDQSplitKeys) {
    NamedBarrier::sync(NamedBarrier::kFirstId + wg, 128);
  } else {
    NamedBarrier::sync(NamedBarrier::kFirstId, BwdConsumer<Cfg>::kDSBarrierThreads);
  }
}

// What both consumers (this file's and flash_bwd_overlap.cuh's) start from: the warpgroup's view, the shared-memory
// base and the K/V descriptors (one K/V buffer, reloaded per tile).
template <class Cfg>
struct BwdConsumerStart {
  BwdConsumer<Cfg> c;
  uint32_t base;
  BwdKVDescs<Cfg> descs;

  __device__ __forceinline__ BwdConsumerStart(uint8_t* smem, int wg)
      : c{wg, static_cast<int>(threadIdx.x % 128), threadIdx.x % 128 == 0}, base(smem_addr(smem)), descs(base, wg) {}
};

// A consumer's tile boundaries: wait for the tile's K/V (phase iter); after the tile's last K/V read (its last dQ
// GEMM waited for), let the producer load the next tile's (one arrival per consumer warpgroup: the leader's wait
// covers the warpgroup's wgmmas, as for the ring's release).
// (Tiles: BwdCtaTiles<Cfg>, or BwdPublishedTiles<Cfg> under kPublishTiles.)
template <class Cfg, class Tiles>
__device__ __forceinline__ void bwd_wait_kv(typename Cfg::Barriers& bars, const Tiles& tiles) {
  wait_in_loop(bars.kv, tiles.iter & 1);
}
template <class Cfg, class Tiles>
__device__ __forceinline__ void bwd_free_kv(const BwdConsumer<Cfg>& c, typename Cfg::Barriers& bars,
                                            const Tiles& tiles) {
  if (c.leader) bars.kv_free.arrive();
  bwd_trace(c.leader, c.wg, tiles.iter, kTraceKVFree);
}

// The tile for the stores after its step loop. Varlen reads it again (two cu_seqlens loads) rather than keep the
// sequence's rows and lengths live across the loop: live there, they pushed the loop's uniform values (ring index,
// buffer parity, wgmma descriptors) into vector registers, 969 against the dense loop's 803 SASS instructions (+112
// IMAD, +64 R2UR, d128 default) and the main kernel 8-10% slower than the dense one on the same lengths (s29e); read
// again, the loop is the dense one's within 3 instructions. Dense tiles are constants of the call.
template <class Cfg>
__device__ __forceinline__ BwdTile bwd_tile_after_loop(const BwdParams& p, const BwdCtaTiles<Cfg>& tiles,
                                                       const BwdTile& t) {
  if constexpr (Cfg::kVarlen) return bwd_tile<Cfg>(p, tiles.tile);
  return t;
}
template <class Cfg>
__device__ __forceinline__ BwdTile bwd_tile_after_loop(const BwdParams&, const BwdPublishedTiles<Cfg>& tiles,
                                                       const BwdTile&) {
  return tiles.tile();
}

// dK and dV accumulators to zero (before the first step). (Sizes differ in flash_bwd_mla.cuh's roles.)
template <int kDKRegs, int kDVRegs>
__device__ __forceinline__ void bwd_zero_dkdv(float (&dk)[kDKRegs], float (&dv)[kDVRegs]) {
  if constexpr (kDKRegs == kDVRegs) {
#pragma unroll
    for (int i = 0; i < kDKRegs; ++i) dk[i] = dv[i] = 0.f;
  } else {
#pragma unroll
    for (int i = 0; i < kDKRegs; ++i) dk[i] = 0.f;
#pragma unroll
    for (int i = 0; i < kDVRegs; ++i) dv[i] = 0.f;
  }
}

// dK (scaled by softmax_scale) and dV of the tile's key block and K/V head, after its last step; their first columns
// dk_col0 / dv_col0 (the warpgroup's col_base(), or flash_bwd_mla.cuh's panels).
template <class Cfg, int kDKRegs, int kDVRegs>
__device__ __forceinline__ void bwd_store_dkdv(const BwdConsumer<Cfg>& c, const BwdParams& p, const BwdTile& cta,
                                               const float (&dk)[kDKRegs], const float (&dv)[kDVRegs], int dk_col0,
                                               int dv_col0) {
  const bool vec16 = p.dkdv_vec16 != 0, f32 = p.dkdv_f32 != 0;
  c.store_rows(p.dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride, cta.seq, cta.kv_head, cta.n_block, dk,
               p.softmax_scale, vec16, dk_col0, f32);
  c.store_rows(p.dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride, cta.seq, cta.kv_head, cta.n_block, dv, 1.f,
               vec16, dv_col0, f32);
}

// Every consumer's tile start (this file's, flash_bwd_overlap.cuh's, flash_bwd_cols.cuh's): dK / dV zeroed, the
// tile's K/V waited for, and the tile's query walk.
template <class Cfg, int kDKRegs, int kDVRegs, class Tiles>
__device__ __forceinline__ BwdQueryWalk<Cfg> bwd_begin_tile(const BwdConsumer<Cfg>& c, const BwdParams& p,
                                                            typename Cfg::Barriers& bars, const Tiles& tiles,
                                                            const BwdTile& t, float (&dk)[kDKRegs],
                                                            float (&dv)[kDVRegs]) {
  bwd_zero_dkdv(dk, dv);
  bwd_trace(c.leader, c.wg, tiles.iter, kTraceTileStart);
  bwd_wait_kv<Cfg>(bars, tiles);
  bwd_trace(c.leader, c.wg, tiles.iter, kTraceKVReady);
  return BwdQueryWalk<Cfg>(p, t.seq, t.n_block, t.kv_head);
}

// And its end, after the last step: dK / dV stored from their first columns dk_col0 / dv_col0 (bwd_store_dkdv).
template <class Cfg, int kDKRegs, int kDVRegs, class Tiles>
__device__ __forceinline__ void bwd_end_tile(const BwdConsumer<Cfg>& c, const BwdParams& p, const Tiles& tiles,
                                             const BwdTile& t,
                                             const float (&dk)[kDKRegs], const float (&dv)[kDVRegs], int dk_col0,
                                             int dv_col0) {
  bwd_store_dkdv(c, p, bwd_tile_after_loop(p, tiles, t), dk, dv, dk_col0, dv_col0);
  bwd_trace(c.leader, c.wg, tiles.iter, kTraceTileEnd);
}

template <class Cfg>
__device__ __forceinline__ void bwd_consumer(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars, int wg) {
  using C = BwdConsumer<Cfg>;
  const BwdConsumerStart<Cfg> start(smem, wg);
  const C& c = start.c;
  const uint32_t base = start.base;
  const BwdKVDescs<Cfg>& descs = start.descs;

  float dk[C::kAccRegs], dv[C::kAccRegs];
  float s[C::kSRegs], dp[C::kSRegs], dq[C::kDQRegs];
  uint32_t pa[C::kKSteps][4], dsa[C::kKSteps][4];

  PipelineState<Cfg::kStages> st;
  int step0 = 0;  // the CTA's steps before this tile (the dS^T / dQ buffers alternate across tiles)
  using Tiles = std::conditional_t<Cfg::kPublishTiles, BwdPublishedTiles<Cfg>, BwdCtaTiles<Cfg>>;
  for (Tiles tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile_at<Cfg>(p, tiles);
    BwdQueryWalk<Cfg> walk = bwd_begin_tile(c, p, bars, tiles, t, dk, dv);
    for (int i = 0; i < walk.total; ++i, walk.advance()) {
      const int step = step0 + i;
      const int m_block = walk.m_block;
      wait_in_loop(bars.qdo.full[st.index], st.phase);
      if (i == 0) bwd_trace(c.leader, wg, tiles.iter, kTraceFirstStage);
      const BwdStage<Cfg> stage(smem, base, st.index);

      // S^T and dP^T, two groups: the exponentials of P^T run while dP^T is on the tensor cores.
      bwd_issue_scores<Cfg, true>(s, dp, descs.k_rows, descs.v_rows, stage);
      wgmma_wait<1>();
      fence_operands(s);
      {
        const BwdTile at = Cfg::kPublishTiles ? BwdPublishedTiles<Cfg>::tile_in_step(base) : t;
        c.masked_probs(s, p, at.seq, stage.lse_log2, m_block, at.n_block);
      }
      wgmma_wait<0>();
      fence_operands(dp);
      // dS^T first, packed and stored, so dP^T dies before P^T is packed (d128 peaks here at dK + dV + 64).
      c.ds_fragments(dp, s, stage, p.scale_log2, dsa);
      uint8_t* ds_smem = smem + Cfg::kOffDS + (step & 1) * Cfg::kDSBytes;
      // d128's bulk dQ (variant 1): FlashAttention-3's order. dV is issued as soon as P^T is packed (it runs under the
      // dS^T store and barrier), then dQ, then dK, and dQ is staged and handed off while dK runs: an RS GEMM reading
      // 32 KB of operands in 512 tensor cycles leaves the shared-memory port half free for the staging's 32 KB of
      // STS, which otherwise shares it with an SS score GEMM (bulk_dq_overlap) or runs with the tensor cores idle.
      // +0-3.4% over bulk_dq_overlap at 512-16k, +0.5-3.8% over the default order below (H100, s41a / s41c; benchmarks/
      // NOTES.md "forty-first session"); waiting for dV before issuing dQ measured the same; d64's m128 in this order
      // 0.96-1.01x, so it keeps the default order.
      if constexpr (Cfg::kDQBulk && !Cfg::kColSplit && Cfg::kHeadDim == 128 && Cfg::kBlockM == 64) {
        C::to_a_fragments(s, pa);
        warpgroup_arrive();
        bwd_issue_rs_over_queries<Cfg>(dv, pa, stage.do_smem);
        wgmma_commit();
        // The dS buffer written now was last read by step - 2's dQ GEMMs, which both warpgroups waited for before
        // step - 1's barrier (as below).
        c.write_ds(ds_smem, dsa);
        bwd_sync_ds<Cfg>(wg);
        bwd_issue_dq<Cfg>(dq, smem_addr(ds_smem), wg, descs.k_dq);
        wgmma_commit();
        warpgroup_arrive();
        bwd_issue_rs_over_queries<Cfg>(dk, dsa, stage.q_smem);
        wgmma_commit();
        wgmma_wait<1>();  // dV and dQ (P^T's fragments free, K's last read of the step done); dK may still run
        fence_operands(dq);
        fence_operands(dv);
        fence_fragments(pa);
        if (i + 1 == walk.total) {
          bwd_trace(c.leader, wg, tiles.iter, kTraceLoopEnd);
          bwd_free_kv<Cfg>(c, bars, tiles);
        }
        bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.head, m_block, step, dq);
        wgmma_wait<0>();
        fence_fragments(dsa);
        fence_operands(dk);
        // Q (dK's B operand) is read now, dO (dV's) at the wait above, lse and delta before the barrier.
        if (c.leader) bars.qdo.consumer_release(st);
        st.advance();
      } else {
        c.write_ds(ds_smem, dsa);
        C::to_a_fragments(s, pa);

        bwd_issue_dkdv<Cfg>(dk, dv, pa, dsa, stage);
        // The dS buffer alternates per step: the buffer written now was last read by step - 2's dQ GEMMs, which both
        // warpgroups waited for (wait_group 0) before step - 1's barrier.
        bwd_sync_ds<Cfg>(wg);
        // The dK/dV wgmmas are done reading pa/dsa before dQ's accumulator becomes live: without this wait the A
        // fragments stay allocated across the dQ GEMM, and in this order d128 had needed 237 of 240 registers (no
        // room for the hang guard's poll counter: 516 B of spills; the order above keeps P^T's and dS^T's fragments
        // across dQ with 0 spills, nvcc 13.0). They ran during the barrier, so the wait is short.
        wgmma_wait<0>();
        fence_fragments(pa);
        fence_fragments(dsa);
        bwd_issue_dq<Cfg>(dq, smem_addr(ds_smem), wg, descs.k_dq);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(dq);
        fence_operands(dk);
        fence_operands(dv);
        // Q, dO, lse and delta of this stage are no longer read: every thread's lse/delta reads precede the barrier
        // above (column split) or this warpgroup's (key split), and the leader's wait covers the wgmmas.
        if (c.leader) bars.qdo.consumer_release(st);
        st.advance();
        // The tile's last dQ GEMM, K's last reader, is done: the next tile's K/V may load under this hand-off.
        if (i + 1 == walk.total) {
          bwd_trace(c.leader, wg, tiles.iter, kTraceLoopEnd);
          bwd_free_kv<Cfg>(c, bars, tiles);
        }
        bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.head, m_block, step, dq);
      }
    }
    bwd_end_tile(c, p, tiles, t, dk, dv, c.col_base(), c.col_base());
    step0 += walk.total;
  }
}

// Variants 2 and 3: defined in flash_bwd_overlap.cuh (included by flash_bwd_launch.cuh).
template <class Cfg>
__device__ __forceinline__ void bwd_consumer_overlap(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars,
                                                     int wg);
// Head dim 256 (BwdConfig::kColSplit, kDQInRing): defined in flash_bwd_cols.cuh (included by flash_bwd_launch.cuh).
template <class Cfg>
__device__ __forceinline__ void bwd_consumer_cols(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars,
                                                  int wg);
template <class Cfg>
__device__ __forceinline__ void bwd_dq_writer_ring(const CUtensorMap* tma_dq, const BwdParams& p, uint8_t* smem,
                                                   typename Cfg::Barriers& bars);
// Multi-head latent attention (BwdConfig::kPanelSplit): defined in flash_bwd_mla.cuh (included by
// flash_bwd_launch.cuh); kRole is the consumer warpgroup (its panels).
template <class Cfg, int kRole>
__device__ __forceinline__ void bwd_consumer_mla(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars);
// Its 128-key form (BwdConfig::kMlaKeySplit): defined in flash_bwd_mla_keys.cuh (included by flash_bwd_launch.cuh);
// kRole is the consumer warpgroup (its keys and dQ panels).
template <class Cfg, int kRole>
__device__ __forceinline__ void bwd_consumer_mla_keys(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars);

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_bwd_kernel(const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
                     const __grid_constant__ CUtensorMap tma_v, const __grid_constant__ CUtensorMap tma_do,
                     const __grid_constant__ CUtensorMap tma_dq_accum, const BwdParams params) {
  uint8_t* smem = aligned_dynamic_smem();
  auto& bars = *reinterpret_cast<typename Cfg::Barriers*>(smem + Cfg::kOffBarriers);

  // warp_specialize's skeleton written out: passed as a lambda, this consumer dispatch moved two register moves in
  // both kernels tried (d64 red dQ, d128 bulk dQ + overlap: 8 SASS lines), whatever the capture or inline attribute.
  const int warpgroup = threadIdx.x / 128;
  init_barriers<Cfg>(bars);

  if (warpgroup == 0) {
    regs_release<Cfg::kProducerRegs>();
    // One branch per warp (else-if): with two independent ifs the warp index stayed live across the producer's
    // tile loop and spilled under its 24 registers (nvcc 13.0).
    if (threadIdx.x / 32 == 0) {
      if (elect_one()) bwd_producer<Cfg>(&tma_q, &tma_k, &tma_v, &tma_do, params, smem, bars);
    } else if (Cfg::kDQBulk && threadIdx.x / 32 == 1) {
      if constexpr (Cfg::kDQInRing) {
        bwd_dq_writer_ring<Cfg>(&tma_dq_accum, params, smem, bars);
      } else {
        bwd_dq_writer<Cfg>(&tma_dq_accum, params, smem);
      }
    }
  } else {
    regs_acquire<Cfg::kConsumerRegs>();
    if constexpr (Cfg::kMlaKeySplit) {
      if (warpgroup == 1) {
        bwd_consumer_mla_keys<Cfg, 0>(params, smem, bars);
      } else {
        bwd_consumer_mla_keys<Cfg, 1>(params, smem, bars);
      }
    } else if constexpr (Cfg::kPanelSplit) {  // each warpgroup its own panels (one instantiation per role)
      if (warpgroup == 1) {
        bwd_consumer_mla<Cfg, 0>(params, smem, bars);
      } else {
        bwd_consumer_mla<Cfg, 1>(params, smem, bars);
      }
    } else if constexpr (Cfg::kColSplit) {
      bwd_consumer_cols<Cfg>(params, smem, bars, warpgroup - 1);
    } else if constexpr (Cfg::kOverlap) {
      bwd_consumer_overlap<Cfg>(params, smem, bars, warpgroup - 1);
    } else {
      bwd_consumer<Cfg>(params, smem, bars, warpgroup - 1);
    }
  }
}

}  // namespace fa3nn::hopper
