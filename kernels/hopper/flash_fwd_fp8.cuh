// FlashAttention forward in FP8 for Hopper: e4m3 Q, K, Vt with per-tile descales, both GEMMs on the FP8 tensor
// cores (QGMMA), fp32 accumulation, bf16/fp16 output and fp32 lse. The oracle is fa3nn/fp8/reference.py, whose
// docstring lists the rounding points performed here in the same order.
//
// Structure as the bf16 kernel (flash_fwd.cuh), whose tile helpers it reuses: one producer warpgroup (TMA), two
// consumer warpgroups of 64 query rows each (three at d64), pingpong between the consumers and, in the unpromoted
// benchmark variants only, intra-warpgroup overlap (S_next = Q K^T is issued with P V of the previous block, and
// the softmax of S_next runs while P V is on the tensor cores; the promoted defaults do not, kPromote below).
// The tile loop is the persistent one of the bf16 kernel (the launcher's grid: one CTA per SM). Differences:
//   * Key blocks of 128, or 256 / 192 at d128 where the descale tiles allow beyond 256 keys (PerTileScaling's default
//     tile at d128 is 256; fa3nn/fp8/key_blocks.py), visited first to last like the emulation: P's e4m3 rounding
//     depends on the running max at the time P is made, so the visiting order is part of the numerics.
//   * V arrives transposed (vt8: head-dim rows of keys), since FP8 wgmma reads B K-major only, with its keys
//     permuted inside 16-key groups so that P's e4m3 A fragments are packed from the registers each thread already
//     holds (wgmma_fp8.cuh, p_to_fp8_fragments).
//   * Scores are scaled per (query tile, key tile) by the descales, and V's descale of each key block is folded into
//     the output rescale: O is kept in units of the current block's v_descale, acc' = acc' * 2^(m_old - m_new) *
//     vd_prev / vd_cur + P8 V8, and the epilogue multiplies by vd_last / (2^8 l).
//   * kPromote (every default kernel): each key block's P8 V8 goes into a fresh accumulator (the
//     first k-step's scale_d = 0) and is added into fp32 O on the CUDA cores, one FFMA per element that also applies
//     the rescale above. Hopper's FP8 tensor cores add each k-step's products into their accumulator with far fewer mantissa
//     bits than fp32, truncating, so an accumulator carried across all key blocks loses a fixed share per k-step
//     of whatever it sums with one sign: the mean of V lost 0.94% at 1k keys, 5.0% at 4k and 18.6% at 16k on the
//     H200 (benchmarks/NOTES.md "every FP8 forward here loses the mean of V"; DeepSeek-V3 promotes its FP8 GEMMs'
//     partial sums to fp32 the same way). The block accumulator costs an O-sized register array, so the promoted
//     kernels run without intra-warpgroup overlap (kOverlap = !kPromote): serial steps (benchmark variants now), or
//     the fused turn, every default (kFusedTurn: P V of block n-1, its promotion and Q K^T of block n in one pingpong
//     turn, so the other warpgroup's softmax hides behind it; d256 with P V in two halves, kPvSplit): at d128 on
//     256-key blocks 868-888 TFLOP/s non-causal at 4k-16k, at d256 1056-1101, +17-22% over d256's serial steps
//     (NOTES, 2026-12-02 eleventh session). Beside the overlapped loop the block accumulator fitted only at d128 with
//     128-key blocks, spilling 36-60 B (CI forbids spills), so that form was removed.
#pragma once
#include <cstdint>
#include <type_traits>

#include "flash_fwd.cuh"
#include "pack16.cuh"
#include "softmax_fp8.cuh"
#include "wgmma_fp8.cuh"

namespace fa3nn::hopper {

struct Fp8FwdParams {
  FwdParams base;  // output, lse, cu_seqlens, shapes, scheduler fields; base.scale_log2 = softmax_scale * log2(e)
  const float *q_descale, *k_descale, *v_descale;  // (batch, nheads[_kv], tiles) float32
  int64_t q_descale_batch_stride, q_descale_head_stride;
  int64_t k_descale_batch_stride, k_descale_head_stride;
  int64_t v_descale_batch_stride, v_descale_head_stride;
  int block_q;  // query rows per q_descale tile (any positive count: each thread reads its own rows' descale)
  FastDiv block_q_div;  // block_q
  // k/v descale tiles per key block, 1 / (block_k / kBlockN) for key rows per tile block_k a multiple of kBlockN, or 0
  // for one tile per sequence (block_k >= every seqlen_k): key block n reads tile floor((n + 0.5) * this), exact for
  // n < 2^22 (the distance to the next integer, >= 0.5 / (block_k / kBlockN), exceeds the float product's error).
  // Replaces an integer division per block that compiled to ~25 instructions twice per key block (ncu, 2026-11-30).
  float tiles_per_block;
  // Varlen: (batch + 1) int32, sequence b's first column in the packed vt8 (fa3nn/fp8/operands.py), a multiple of 16
  // so the Vt TMA load's innermost coordinate is 16-byte aligned (an unaligned one is an illegal instruction). Read
  // once per tile by the producer. Dense: nullptr (each batch's Vt starts at column 0).
  const int* vt_starts;
};

// kPolyExpEvery > 0: every kPolyExpEvery-th score's exp2 on the FP32 pipe (exp2_poly in softmax_fp8.cuh); < 0:
// every -kPolyExpEvery-th P fragment register's four scores by the linear exp2 (e4m3_exp2.cuh).
// kExperiment: Fp8Experiment, a schedule (kFusedTurn, the d64/d128 default) or a benchmark-only d128 build.
enum Fp8Experiment : int {
  kNoExperiment = 0,
  kSkipSoftmax = 1,   // P = c * S, no row max, exp2 or row sum: WRONG output; times the loop without its softmax
  kPlainPvWait = 2,   // the P V wait without the softmax dependency, which ptxas hoists above the softmax
  kSkipKVLoads = 3,   // the producer signals K/V stages without loading them (as the bf16 kernel's kSkipKVLoads):
                      // WRONG output; times the loop without its L2 -> shared-memory K/V traffic
  kCutExp2 = 4,       // the softmax without its exp2s (kSoftmaxNoExp2): WRONG output; times the MUFU share
  kCutRowMax = 5,     // the softmax without its row max tree (kSoftmaxNoRowMax): WRONG output; times the max chain
  kSkipSoftmaxAndKVLoads = 6,  // kSkipSoftmax and kSkipKVLoads together: the loop's skeleton without L2 traffic
  kFusedTurn = 7,     // promoted kernels only, correct output, the d64 and d128 default: one pingpong turn per key
                      // block holding P V of the previous block, its promotion into O and this block's Q K^T
  // kFusedTurn with a part of the softmax cut (WRONG outputs, timing only; built by benchmarks/micro/fp8_trace.cu
  // alone, not by the library): what each part costs inside the default's loop.
  kFusedTurnCutExp2 = 8,
  kFusedTurnCutRowMax = 9,
  kFusedTurnSkipSoftmax = 10,
  // kFusedTurn with Q K^T issued as two key halves in two commit groups (256-key blocks; d128's default there in its
  // kFusedTurnSplitSIntMax form below): the first half's mask and row max run while the second half is still on the
  // tensor cores. Correct output.
  kFusedTurnSplitS = 11,
  // kFusedTurn / kFusedTurnSplitS with each row's max from 3-input integer maxes on the score bits
  // (positive_row_max in softmax.cuh; the float tree only in a warp with a row lacking a positive score).
  // Bitwise the same output.
  kFusedTurnIntMax = 12,
  kFusedTurnSplitSIntMax = 13,
  // kFusedTurnSplitSIntMax with softmax turns (a diagnostic): a second ring of named barriers lets one
  // warpgroup's softmax (after its scores' wait, to its probabilities) run at a time, so the two never share MUFU.
  // Correct output (bitwise that of 13); measured no faster (s20a), and the trace then shows what one softmax
  // takes with no other beside it (benchmarks/NOTES.md, twentieth session).
  kFusedTurnSoftmaxTurns = 14,
  // kFusedTurnSplitSIntMax with P's row sums from the P V GEMM (kMmaRowSum below): the softmax's FADD tree (126 per
  // block and thread at 256 keys) leaves the CUDA cores, whose FP32 instructions run at half rate while the other
  // warpgroup's wgmma computes (benchmarks/micro/gemm_beside.cu, s21a: FADD x2.0, FFMA x1.5-1.75, the softmax
  // x1.5-1.6). Numerics: the sum of the e4m3 probabilities that multiply V, per block in the tensor cores' accumulator
  // like O's block (so their truncation is common to O and l), promoted into fp32 with O.
  // (The same sums from m64n8k32 GEMMs over one 1 KB tile of ones, on three K/V stages, ran 0-5% slower than this
  // on two in every row of s21c and were removed.) The d128 default on 256-key blocks.
  kFusedTurnMmaRowSum = 15,
  // kFusedTurnMmaRowSum with the turns running on across tiles (kCrossTile below): a tile's last P V, its store and
  // the next tile's first Q K^T in one turn. Bitwise 15's output; d128's default on 256-key blocks.
  // (17, its store after the turn that issued the next tile's first Q K^T, 0 spills: measured no faster, s24e.)
  kFusedTurnMmaRowSumCrossTile = 16,
  // kFusedTurnMmaRowSumCrossTile storing O through shared memory by TMA (kTmaStoreO below). Bitwise 16's output.
  kFusedTurnMmaRowSumCrossTileTmaStore = 18,
};
__host__ __device__ constexpr bool cross_tile(int experiment) {
  return experiment == kFusedTurnMmaRowSumCrossTile || experiment == kFusedTurnMmaRowSumCrossTileTmaStore;
}
__host__ __device__ constexpr bool mma_row_sum(int experiment) {
  return experiment == kFusedTurnMmaRowSum || cross_tile(experiment);
}
__host__ __device__ constexpr bool int_row_max(int experiment) {
  return experiment == kFusedTurnIntMax || experiment == kFusedTurnSplitSIntMax ||
         experiment == kFusedTurnSoftmaxTurns || mma_row_sum(experiment);
}
__host__ __device__ constexpr bool skips_softmax(int experiment) {
  return experiment == kSkipSoftmax || experiment == kSkipSoftmaxAndKVLoads || experiment == kFusedTurnSkipSoftmax;
}
__host__ __device__ constexpr bool fused_turn(int experiment) {
  return experiment == kFusedTurn || experiment == kFusedTurnCutExp2 || experiment == kFusedTurnCutRowMax ||
         experiment == kFusedTurnSkipSoftmax || experiment == kFusedTurnSplitS || int_row_max(experiment);
}
__host__ __device__ constexpr bool skips_kv_loads(int experiment) {
  return experiment == kSkipKVLoads || experiment == kSkipSoftmaxAndKVLoads;
}
__host__ __device__ constexpr int softmax_cut(int experiment) {
  return experiment == kCutExp2 || experiment == kFusedTurnCutExp2       ? kSoftmaxNoExp2
         : experiment == kCutRowMax || experiment == kFusedTurnCutRowMax ? kSoftmaxNoRowMax
                                                                         : kSoftmaxFull;
}
// kBlockN_: keys per block, 128, or 192 / 256 at head dim 128 (256 the default there beyond 256 keys: the per-block
// fixed cost of the loop over 2x the keys; needs one k/v descale per block, so block_k a multiple of the block or
// one per sequence).
// kPromote_: per-block fp32 promotion of P V (see the top of this file) without intra-warpgroup overlap: serial
// steps (each warpgroup runs Q K^T, softmax, P V of one block in turn, pingpong interleaving the two warpgroups, so
// the block accumulator is dead while S lives and shares its registers: S 96 + O 64 + P 24 at 192 keys), or with
// kFusedTurn P V of one block and Q K^T of the next in one turn. false: the overlapped loop with one tensor-core
// accumulator across all key blocks (the kernels before 2026-12-01's seventh session, which lose the mean of V).
// kConsumers_: consumer warpgroups of 64 query rows each (3: d64 only, its default, 160 registers each, as the bf16
// d64 kernel: +12-38% over two at 2k-16k keys, fp8d64w3-h200-20261202-0238).
template <int kHeadDim_, int kStages_, int kQStages_, bool kOutBF16_, bool kCausal_, bool kPingpong_ = true,
          int kPolyExpEvery_ = 0, int kExperiment_ = kNoExperiment, int kBlockN_ = 128, bool kPromote_ = false,
          int kConsumers_ = 2, bool kDynamic_ = false>
struct Fp8FwdConfig {
  static constexpr int kHeadDim = kHeadDim_, kStages = kStages_, kQStages = kQStages_;
  static constexpr int kPolyExpEvery = kPolyExpEvery_, kExperiment = kExperiment_;
  static constexpr int kLinearExpEvery = kPolyExpEvery < 0 ? -kPolyExpEvery : 0;
  static constexpr bool kOutBF16 = kOutBF16_, kCausal = kCausal_, kPingpong = kPingpong_;
  static constexpr bool kLocal = false;  // no sliding windows (key_block_range, block_needs_mask: flash_fwd.cuh)
  static constexpr bool kPromote = kPromote_, kOverlap = !kPromote_;
  // Serial promoted steps at head dim 256 issue P V in two n128 halves, one after the other, into one 64-register
  // block accumulator (O 128 + block 64 + P 16 registers; a whole-width block accumulator would need 272).
  static constexpr bool kFused = fused_turn(kExperiment_);
  // The fused turn's K stage wait between the promotion's FFMAs and the next Q K^T, instead of before the turn:
  // its spin loop is a basic-block boundary ptxas does not move the FFMAs across, so the block accumulator is dead
  // before S is written and the two share registers (256-key blocks: O 64 + S 128 + P 32; with the FFMAs
  // interleaved into the Q K^T issue, S + O + block accumulator = 256 registers spilled 260-308 B; head dim 256:
  // O 128 + S 64 + P 16, spilled 336-352 B the other way). 0 spills either way with it.
  // Three consumers at d128 (160 registers): without it the 128-key fused turn spilled 512-516 B.
  static constexpr bool kKWaitInTurn =
      kFused && (kBlockN_ == 256 || kHeadDim_ == 256 || (kConsumers_ == 3 && kHeadDim_ == 128));
  static constexpr bool kSoftmaxTurns = kExperiment_ == kFusedTurnSoftmaxTurns;
  // kMmaRowSum: 8 rows of e4m3 ones after every Vt panel in shared memory (written once at kernel start; TMA never
  // touches them) and P V as m64n(D + 8), so columns D..D+7 of the block accumulator each hold the block's row sum
  // of P8 (every thread of a quad the whole sum; no quad reduction); added into the row sums at the promotion.
  static constexpr bool kMmaRowSum = mma_row_sum(kExperiment_);
  // kCrossTile: the fused turn does not stop at tile ends. A tile of n key blocks otherwise takes n + 1 turns per
  // warpgroup, the first with Q K^T alone and the last with P V alone, and the other warpgroup's softmax outlasts
  // each of those half turns with the tensor cores idle; here the last P V of a tile and the first Q K^T of the next
  // share one turn (n turns per tile), the tile's finalize and store between them; the next tile's descales are
  // loaded before that turn. Causal +1..+6% at 2k-8k keys, non-causal within the calls' spread (s24c-s24e).
  static constexpr bool kCrossTile = cross_tile(kExperiment_);
  // kTmaStoreO: at a tile's end each warpgroup writes its 64 rows of O (bf16/fp16) into its own 16 KB of shared
  // memory (two SW128 panels of 64 columns) and its thread 0 stores them with two TMA boxes, instead of 64 4-byte
  // global stores per thread (each warp instruction 8 rows x 16 B: ~2000 clocks inside the turn at the tile's end,
  // fp8_trace s25f). Dense calls only (FwdParams::store_o_tma; varlen keeps the direct stores).
  static constexpr bool kTmaStoreO = kExperiment_ == kFusedTurnMmaRowSumCrossTileTmaStore;
  static constexpr bool kSplitS = kExperiment_ == kFusedTurnSplitS || kExperiment_ == kFusedTurnSplitSIntMax ||
                                  kSoftmaxTurns || kMmaRowSum;
  // The tile's batch, head and rows decoded again after the key loop for the store, so that they need no registers
  // across it (ptxas spilled them: 20-28 B at 192 keys, 20-24 B with three consumers at d128).
  static constexpr bool kDecodeTileAfterLoop = kBlockN_ >= 192 || (kConsumers_ == 3 && kHeadDim_ == 128);
  static constexpr int kPvSplit = kPromote && kHeadDim > 128 ? 2 : 1;
  static constexpr int kPvCols = kHeadDim / kPvSplit + (kMmaRowSum ? 8 : 0);  // N of one P V GEMM
  static constexpr int kConsumers = kConsumers_, kBlockM = 64 * kConsumers, kBlockN = kBlockN_;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // 128*24 + 256*240 = 64,512 of 65,536; three consumers: 128*32 + 384*160 = 65,536
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32, kConsumerRegs = kConsumers == 2 ? 240 : 160;
  // Q and K rows are headdim bytes: 128-B swizzled panels, or one 64-B swizzled panel at head dim 64.
  static constexpr int kRowBytes = kHeadDim >= 128 ? 128 : kHeadDim;
  static constexpr int kPanels = kHeadDim / kRowBytes;
  // Vt: headdim rows of kBlockN keys, in panels of kVPanelKeys keys (one swizzled row each: 128 keys SW128, or
  // 64 keys SW64 when the block is not a multiple of 128; TMA's swizzled boxes are at most 128 B wide).
  static constexpr int kVPanelKeys = kBlockN % 128 == 0 ? 128 : 64;
  static constexpr int kVPanels = kBlockN / kVPanelKeys;
  static constexpr uint32_t kVPanelBytes = kHeadDim * kVPanelKeys;  // one panel's TMA box
  static constexpr uint32_t kOnesBytes = kMmaRowSum ? 8 * kVPanelKeys : 0;  // rows of ones after it
  static constexpr uint32_t kVPanelStride = kVPanelBytes + kOnesBytes;
  static constexpr uint32_t kVStageBytes = kVPanels * kVPanelStride;
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim;
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim;
  static constexpr uint32_t kVBytes = kHeadDim * kBlockN;
  static constexpr uint32_t kQPanelBytes = kBlockM * kRowBytes;
  static constexpr uint32_t kKPanelBytes = kBlockN * kRowBytes;
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head dim");
  static_assert(kConsumers == 2 || (kConsumers == 3 && kHeadDim <= 128), "three consumers up to head dim 128");
  static_assert(kBlockN == 128 || ((kBlockN == 192 || kBlockN == 256) && kHeadDim == 128),
                "key block: 128, or 192 / 256 at head dim 128");
  static_assert(!kPromote || kExperiment == kNoExperiment || kFused,
                "the promoted kernel has no timing experiments");
  static_assert(!kFused || kPromote, "kFusedTurn is a schedule of the promoted kernel");
  static_assert(!kSplitS || kBlockN == 256, "split S: two n128 halves of a 256-key block");
  static_assert(!kMmaRowSum || (kHeadDim == 128 && kFused), "row sums by MMA: the d128 fused turn (pv_into_o)");
  static_assert(!kCrossTile || (kKWaitInTurn && kDecodeTileAfterLoop), "the cross-tile chain: the 256-key kernel");
  static_assert(!kTmaStoreO || (kCrossTile && kConsumers == 2), "the TMA store of O: the cross-tile chain");
  static_assert(kKPanelBytes % 1024 == 0 && kQPanelBytes % 1024 == 0 && kVPanelBytes % 1024 == 0,
                "1024-B alignment");

  // Vt rides in the v ring. Each K and V stage is released by every consumer warp's lane 0 (four arrivals per
  // warpgroup), the Q stage by each warpgroup's thread 0. With one thread releasing for its whole warpgroup, that
  // thread's warp (warp 0, which also shares its scheduler with the producer warp) ran 60-120 clocks per key block
  // behind its warpgroup's other warps, and the warpgroup-wide wgmma waits for the last warp (s20b / s20c traces:
  // releases on warp 1 or the producer on warp 1 each halved that spread; s20d / s20e: +0..+3% in 16 of 18 rows of
  // a same-run A/B). The bf16 forward measured no gain from the same change (s20g) and keeps thread 0's releases.
  static constexpr uint32_t kWarpsPerConsumer = 4;
  // The dynamic deal of varlen calls, as the bf16 kernel's (FwdConfig::kDynamic): the producer takes each tile after
  // its CTA's first from FwdParams::tile_counter and publishes it with its Q stage (FwdTileBarriers); the consumers
  // walk the published tiles. Built for the cross-tile default (d128, 256-key blocks) only: with it the other
  // default kernels spilled 52-720 B (run_fp8_tiles).
  static constexpr bool kDynamic = kDynamic_;
  static_assert(!kDynamic || (kCrossTile && !skips_kv_loads(kExperiment_)), "the dynamic deal: the cross-tile chain");
  using Dynamic = Fp8FwdConfig<kHeadDim_, kStages_, kQStages_, kOutBF16_, kCausal_, kPingpong_, kPolyExpEvery_,
                               kExperiment_, kBlockN_, kPromote_, kConsumers_, true>;
  using Barriers = std::conditional_t<kDynamic, FwdTileBarriers<kQStages, kStages, kWarpsPerConsumer>,
                                      FwdBarriers<kQStages, kStages, kWarpsPerConsumer>>;
  // Shared memory, from a 1024-B aligned base: Q stages | K stages | Vt stages | barriers.
  static constexpr uint32_t kOffK = kQStages * kQBytes;
  static constexpr uint32_t kOffV = kOffK + kStages * kKBytes;
  static constexpr uint32_t kOffO = kOffV + kStages * kVStageBytes;
  static constexpr uint32_t kOPanelBytes = 64 * 128;  // one warpgroup's 64 rows x 64 columns of 2 bytes
  static constexpr uint32_t kOBytes = kTmaStoreO ? kBlockM * kHeadDim * 2 : 0;
  static constexpr uint32_t kOffBarriers = kOffO + kOBytes;
  static constexpr uint32_t kSmemBytes = kOffBarriers + sizeof(Barriers) + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "exceeds Hopper's 227 KB of shared memory per block");
};

// The dynamic deal's tiles whose rows attend no key (causal calls with more queries than keys), written by the
// producer thread: zeros and lse -inf, one 4-byte store at a time (rare tiles; the consumers' store_empty in their
// tile walk made the 256-key kernel spill 4-28 B).
template <class Cfg>
__device__ __forceinline__ void store_empty_tile(const FwdParams& p, const SeqRange& r, const Tile& t) {
  uint16_t* out = static_cast<uint16_t*>(p.out) + t.batch * p.out_batch_stride + t.head * p.out_head_stride;
  float* lse = p.lse + t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + r.q_start;
  const int row_end = min(r.seqlen_q, (t.m_block + 1) * Cfg::kBlockM);
  for (int row = t.m_block * Cfg::kBlockM; row < row_end; ++row) {
    uint32_t* out_row = reinterpret_cast<uint32_t*>(out + static_cast<int64_t>(r.q_start + row) * p.out_row_stride);
    for (int col = 0; col < Cfg::kHeadDim / 2; ++col) out_row[col] = 0u;
    lse[row] = -INFINITY;
  }
}

template <class Cfg>
__device__ __forceinline__ void fp8_producer_loop(const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                                                  const CUtensorMap* tma_vt, const FwdParams& p,
                                                  const int* vt_starts, uint8_t* smem, typename Cfg::Barriers& bars) {
  tma_prefetch_descriptor(tma_q);
  tma_prefetch_descriptor(tma_k);
  tma_prefetch_descriptor(tma_vt);
  StaticPersistentScheduler<Cfg::kCausal> sched(p.deal);
  PipelineState<Cfg::kStages> k_state, v_state;
  PipelineState<Cfg::kQStages> q_state;
  // Q (its stage acquired by the caller, which publishes the tile there first under the dynamic deal), then K_n and
  // Vt_n for the tile's key blocks.
  auto load_tile = [&](const Tile& t, const SeqRange& r, int n_blocks) {
    const int head_kv = p.group_div.div(t.head);
    const int vt_start = vt_starts != nullptr ? vt_starts[t.batch] : 0;
    bars.q.full[q_state.index].arrive_expect_tx(Cfg::kQBytes);
    uint8_t* q_dst = smem + q_state.index * Cfg::kQBytes;
#pragma unroll
    for (int panel = 0; panel < Cfg::kPanels; ++panel)
      tma_load_4d(tma_q, bars.q.full_barrier(q_state), q_dst + panel * Cfg::kQPanelBytes, panel * Cfg::kRowBytes,
                  r.q_start + t.m_block * Cfg::kBlockM, t.head, r.batch_coord);
    q_state.advance();

    for (int n_block = 0; n_block < n_blocks; ++n_block) {
      if constexpr (skips_kv_loads(Cfg::kExperiment)) {
        bars.signal_kv_unloaded(k_state, v_state);
        continue;
      }
      const int key = r.k_start + n_block * Cfg::kBlockN;
      bars.k.producer_acquire(k_state, Cfg::kKBytes);
      uint8_t* k_dst = smem + Cfg::kOffK + k_state.index * Cfg::kKBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel)
        tma_load_4d(tma_k, bars.k.full_barrier(k_state), k_dst + panel * Cfg::kKPanelBytes, panel * Cfg::kRowBytes,
                    key, head_kv, r.batch_coord);
      k_state.advance();

      bars.v.producer_acquire(v_state, Cfg::kVBytes);
      uint8_t* v_dst = smem + Cfg::kOffV + v_state.index * Cfg::kVStageBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kVPanels; ++panel)
        tma_load_4d(tma_vt, bars.v.full_barrier(v_state), v_dst + panel * Cfg::kVPanelStride,
                    vt_start + n_block * Cfg::kBlockN + panel * Cfg::kVPanelKeys, 0, head_kv, r.batch_coord);
      v_state.advance();
    }
  };
  if constexpr (Cfg::kDynamic) {
    // As the bf16 producer's dynamic deal (flash_fwd.cuh), but a tile whose rows attend no key is written here
    // (store_empty_tile) instead of being published; the next index is taken as a tile starts.
    for (int tile = sched.first(); sched.valid(tile);) {
      const int next = p.deal.grid + atomicAdd(p.tile_counter, 1);
      const Tile t = sched.decode(tile);
      const SeqRange r = seq_range(p, t.batch);
      if (t.m_block * Cfg::kBlockM < r.seqlen_q) {
        const int n_blocks = key_block_range<Cfg>(p, r, t.m_block).count;
        if (n_blocks > 0) {
          bars.q.producer_wait_empty(q_state);
          bars.tile[q_state.index] = tile;
          load_tile(t, r, n_blocks);
        } else {
          store_empty_tile<Cfg>(p, r, t);
        }
      }
      tile = next;
    }
    bars.q.producer_wait_empty(q_state);
    bars.tile[q_state.index] = -1;
    bars.q.full[q_state.index].arrive();
  } else {  // (the loads written out, not load_tile: so every static kernel's SASS stays as measured)
    for (int tile = sched.first(); sched.valid(tile); tile = sched.next(tile)) {
      const Tile t = sched.decode(tile);
      const SeqRange r = seq_range(p, t.batch);
      if (t.m_block * Cfg::kBlockM >= r.seqlen_q) continue;
      const int n_blocks = key_block_range<Cfg>(p, r, t.m_block).count;
      if (n_blocks <= 0) continue;
      const int head_kv = p.group_div.div(t.head);
      const int vt_start = vt_starts != nullptr ? vt_starts[t.batch] : 0;

      bars.q.producer_acquire(q_state, Cfg::kQBytes);
      uint8_t* q_dst = smem + q_state.index * Cfg::kQBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel)
        tma_load_4d(tma_q, bars.q.full_barrier(q_state), q_dst + panel * Cfg::kQPanelBytes, panel * Cfg::kRowBytes,
                    r.q_start + t.m_block * Cfg::kBlockM, t.head, r.batch_coord);
      q_state.advance();

      for (int n_block = 0; n_block < n_blocks; ++n_block) {
        if constexpr (skips_kv_loads(Cfg::kExperiment)) {
          bars.signal_kv_unloaded(k_state, v_state);
          continue;
        }
        const int key = r.k_start + n_block * Cfg::kBlockN;
        bars.k.producer_acquire(k_state, Cfg::kKBytes);
        uint8_t* k_dst = smem + Cfg::kOffK + k_state.index * Cfg::kKBytes;
#pragma unroll
        for (int panel = 0; panel < Cfg::kPanels; ++panel)
          tma_load_4d(tma_k, bars.k.full_barrier(k_state), k_dst + panel * Cfg::kKPanelBytes,
                      panel * Cfg::kRowBytes, key, head_kv, r.batch_coord);
        k_state.advance();

        bars.v.producer_acquire(v_state, Cfg::kVBytes);
        uint8_t* v_dst = smem + Cfg::kOffV + v_state.index * Cfg::kVStageBytes;
#pragma unroll
        for (int panel = 0; panel < Cfg::kVPanels; ++panel)
          tma_load_4d(tma_vt, bars.v.full_barrier(v_state), v_dst + panel * Cfg::kVPanelStride,
                      vt_start + n_block * Cfg::kBlockN + panel * Cfg::kVPanelKeys, 0, head_kv, r.batch_coord);
        v_state.advance();
      }
    }
  }
}

// a if kFirst else b (arrays of different sizes: no conditional expression).
template <bool kFirst, class A, class B>
__device__ __forceinline__ constexpr auto& pick(A& a, B& b) {
  if constexpr (kFirst) return a;
  else return b;
}

// Consumer-side helpers for one warpgroup; `tid` is the thread's index in it.
template <class Cfg>
struct Fp8Consumer {
  static constexpr int kSRegs = Cfg::kBlockN / 2;
  static constexpr int kORegs = Cfg::kHeadDim / 2;
  static constexpr int kKSteps = Cfg::kBlockN / 32;
  static constexpr uint32_t kSchedThreads = 2 * 128;

  int wg;
  int tid;

  __device__ __forceinline__ int row0(int m_block) const {  // this thread's first row in the sequence
    return m_block * Cfg::kBlockM + wg * 64 + (tid / 32) * 16 + (tid % 32) / 4;
  }

  // Pingpong (as in flash_fwd.cuh): the consumer warpgroups take turns issuing their GEMMs.
  __device__ __forceinline__ void gemm_turn_begin() const {
    if constexpr (Cfg::kPingpong) NamedBarrier::sync(NamedBarrier::kFirstId + wg, kSchedThreads);
  }
  __device__ __forceinline__ void gemm_turn_end() const {
    if constexpr (Cfg::kPingpong)
      NamedBarrier::arrive(NamedBarrier::kFirstId + (wg + 1) % Cfg::kConsumers, kSchedThreads);
  }
  // kSoftmaxTurns: the second ring (ids kFirstId + 4 + wg, clear of the GEMM ring's and the store's).
  static constexpr uint32_t kSoftmaxTurnId = NamedBarrier::kFirstId + 4;
  __device__ __forceinline__ void softmax_turn_begin() const {
    if constexpr (Cfg::kSoftmaxTurns) NamedBarrier::sync(kSoftmaxTurnId + wg, kSchedThreads);
  }
  __device__ __forceinline__ void softmax_turn_end() const {
    if constexpr (Cfg::kSoftmaxTurns)
      NamedBarrier::arrive(kSoftmaxTurnId + (wg + 1) % Cfg::kConsumers, kSchedThreads);
  }

  // -inf on columns past the sequence's keys or, under causal, past the row's bottom-right aligned diagonal; over the
  // score registers [kFirst, kFirst + kCount) (split S masks each half when it lands).
  template <int kFirst = 0, int kCount = kSRegs>
  __device__ __forceinline__ void apply_mask(float (&s)[kSRegs], const SeqRange& r, int m_block, int n_block) const {
    const int quad_col = 2 * (tid % 4);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int limit = r.seqlen_k - n_block * Cfg::kBlockN;  // block-relative columns < limit are attended
      if constexpr (Cfg::kCausal)
        limit = min(limit, row0(m_block) + 8 * half + r.seqlen_k - r.seqlen_q + 1 - n_block * Cfg::kBlockN);
#pragma unroll
      for (int i = kFirst; i < kFirst + kCount; ++i) {
        if (((i >> 1) & 1) != half) continue;
        if (8 * (i >> 2) + quad_col + (i & 1) >= limit) s[i] = -INFINITY;
      }
    }
  }

  // Rescale O by one factor per row; skipped when every factor of the warp is exactly 1 (per-tensor V scales once
  // the row maxima settle).
  __device__ __forceinline__ static void rescale(float (&o)[kORegs], const float (&factor)[2]) {
    if (!__any_sync(0xffffffff, factor[0] != 1.f || factor[1] != 1.f)) return;
#pragma unroll
    for (int i = 0; i < kORegs; ++i) o[i] *= factor[(i >> 1) & 1];
  }

  // kPromote: O = O * factor + block, in fp32 (block: one key block's P V from its fresh accumulator), over O's
  // registers [first, first + kORegs / kPvSplit): the m64n(D/2) accumulator of head-dim half h is O's registers from
  // h * kORegs / 2 on (register i holds column 8 (i / 4) + 2 q + i % 2 of row (i / 2) % 2 in both layouts); a
  // kMmaRowSum block's last 4 registers (the row sums) are not O's.
  template <int M>
  __device__ __forceinline__ static void rescale_add(float (&o)[kORegs], const float (&factor)[2],
                                                     const float (&block)[M], int first = 0) {
    constexpr int N = kORegs / Cfg::kPvSplit;
    static_assert(M >= N, "a block accumulator covers its O columns");
#pragma unroll
    for (int i = 0; i < N; ++i) o[first + i] = fmaf(o[first + i], factor[(i >> 1) & 1], block[i]);
  }

  __device__ __forceinline__ static uint32_t pack_out(float lo, float hi) { return pack_16x2<Cfg::kOutBF16>(lo, hi); }

  // O * out_scale[row] rounded once to the output dtype, and lse; rows past the sequence are not stored.
  __device__ __forceinline__ void store(const FwdParams& p, const SeqRange& r, const Tile& t, const float (&o)[kORegs],
                                        const float (&out_scale)[2], const float (&lse)[2]) const {
    uint16_t* out = static_cast<uint16_t*>(p.out) + t.batch * p.out_batch_stride + t.head * p.out_head_stride;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0(t.m_block) + 8 * half;
      if (row >= r.seqlen_q) continue;
      uint16_t* out_row = out + static_cast<int64_t>(r.q_start + row) * p.out_row_stride + 2 * (tid % 4);
#pragma unroll
      for (int j = 0; j < kORegs / 4; ++j) {
        const int i = 4 * j + 2 * half;
        *reinterpret_cast<uint32_t*>(out_row + 8 * j) = pack_out(o[i] * out_scale[half], o[i + 1] * out_scale[half]);
      }
      if (tid % 4 == 0)
        p.lse[t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + r.q_start + row] = lse[half];
    }
  }

  // kTmaStoreO: O * out_scale[row] rounded once to the output dtype into this warpgroup's shared-memory rows `buf`
  // (st_shared_rows_sw128: the SW128 layout of the TMA boxes), then thread 0 issues
  // the two boxes as one bulk group (TMA clips rows past seqlen_q); lse as store(). Thread 0 first waits until the
  // previous tile's boxes have been read out of `buf`; the named barrier `bar` (this warpgroup's 128 threads) orders
  // that wait before the writes, and the writes (with the proxy fence) before the TMA store.
  __device__ __forceinline__ void store_tma(const CUtensorMap* tma_o, uint8_t* buf, uint32_t bar, const FwdParams& p,
                                            const SeqRange& r, const Tile& t, const float (&o)[kORegs],
                                            const float (&out_scale)[2], const float (&lse)[2]) const {
    if (tid == 0) tma_store_wait_read<0>();
    NamedBarrier::sync(bar, 128);
    st_shared_rows_sw128(smem_addr(buf), Cfg::kOPanelBytes, tid, o, out_scale,
                         [](float lo, float hi) { return pack_out(lo, hi); });
    fence_proxy_async_smem();
    NamedBarrier::sync(bar, 128);
    if (tid == 0) {
      const int row = r.q_start + t.m_block * Cfg::kBlockM + wg * 64;
#pragma unroll
      for (int panel = 0; panel < Cfg::kHeadDim / 64; ++panel)
        tma_store_4d(tma_o, buf + panel * Cfg::kOPanelBytes, panel * 64, row, t.head, r.batch_coord);
      tma_store_commit();
    }
    if (tid % 4 == 0) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = row0(t.m_block) + 8 * half;
        if (row < r.seqlen_q)
          p.lse[t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + r.q_start + row] = lse[half];
      }
    }
  }

  __device__ __forceinline__ void store_empty(const FwdParams& p, const SeqRange& r, const Tile& t) const {
    float zeros[kORegs];
#pragma unroll
    for (int i = 0; i < kORegs; ++i) zeros[i] = 0.f;
    const float none[2] = {0.f, 0.f}, lse[2] = {-INFINITY, -INFINITY};
    store(p, r, t, zeros, none, lse);
  }
};

// The descales of one (batch, head) for the tile being computed.
struct TileDescales {
  float q[2];        // this thread's two query rows
  const float* k;    // k/v descale rows of (batch, head_kv)
  const float* v;
  float tiles_per_block;

  __device__ __forceinline__ int tile(int n_block) const {
    return __float2int_rz((static_cast<float>(n_block) + 0.5f) * tiles_per_block);
  }
  __device__ __forceinline__ float k_at(int n_block) const { return __ldg(k + tile(n_block)); }
  __device__ __forceinline__ float v_at(int n_block) const { return __ldg(v + tile(n_block)); }
};

// FA3NN_FP8_TRACE (benchmarks/micro/fp8_trace.cu only; never in the library): CTA 0's first tile of the fused-turn
// loop records clock64 at each step of each key block, per consumer warp (lane 0), so the time of every
// phase can be read off the real kernel. Events of block n: 0 loop top, 1 K/V stages ready, 2 turn acquired,
// 3 P V of block n-1 waited and promoted, 4 Q K^T issued and turn released, 5 S ready, 6 softmax done, 7 P and
// the O factor ready; 8 (kKWaitInTurn kernels) the K stage ready inside the turn, between 3 and 4.
// The cross-tile chain (kCrossTile) also records, per warpgroup (thread 0), CTA 0's tiles in g_fp8_tile_trace: the
// clock64 just before each tile's first Q K^T issue, its key blocks and m_block; after the last tile, its store's end
// (key blocks -1). A tile's time is the next entry's clock minus its own (its key loop and the turn at its end).
#ifdef FA3NN_FP8_TRACE
// up to three consumers, each warp's lane 0
constexpr int kFp8TraceWarpgroups = 3, kFp8TraceWarps = 4, kFp8TraceBlocks = 128, kFp8TraceEvents = 9;
__device__ long long g_fp8_trace[kFp8TraceWarpgroups][kFp8TraceWarps][kFp8TraceBlocks][kFp8TraceEvents];
constexpr int kFp8TraceTiles = 64, kFp8TraceTurnEvents = 8;
__device__ long long g_fp8_tile_trace[kFp8TraceWarpgroups][kFp8TraceTiles][3];
// The turn at a tile's end (the chain's boundary), per warpgroup (thread 0) and tile of CTA 0: 0 after the last key
// block's qk_to_p, 1 next tile found and its descales issued, 2 V stage ready, 3 turn acquired, 4 last P V waited and
// promoted, 5 finalized and stored, 6 Q / K stages ready, 7 first Q K^T issued and turn released.
__device__ long long g_fp8_turn_trace[kFp8TraceWarpgroups][kFp8TraceTiles][kFp8TraceTurnEvents];
#endif

template <class Cfg>
__device__ __forceinline__ void fp8_consumer_loop(const Fp8FwdParams& params, uint8_t* smem,
                                                  typename Cfg::Barriers& bars, int wg, const CUtensorMap* tma_o) {
  // Broadcast from lane 0 so the compiler knows the index is warp-uniform: Q's wgmma descriptors then live in
  // uniform registers instead of being moved with R2UR every k-step (192-key d128 loop: 747 -> 714 SASS
  // instructions per warp and block).
  wg = __shfl_sync(0xffffffffu, wg, 0);
  using C = Fp8Consumer<Cfg>;
  const FwdParams& p = params.base;
  const C c{wg, static_cast<int>(threadIdx.x % 128)};
  const bool leader = c.tid == 0;               // releases the Q stage for the warpgroup
  const bool warp_leader = c.tid % 32 == 0;     // releases K and V stages for its warp (Cfg::Barriers)
  StaticPersistentScheduler<Cfg::kCausal> sched(p.deal);
  PipelineState<Cfg::kStages> k_state, v_state;
  PipelineState<Cfg::kQStages> q_state;

  const uint32_t smem_base = smem_addr(smem);
  const uint64_t desc_q0 = make_desc_fp8_kmajor<Cfg::kRowBytes>(smem_base + wg * 64 * Cfg::kRowBytes);
  const uint64_t desc_k0 = make_desc_fp8_kmajor<Cfg::kRowBytes>(smem_base + Cfg::kOffK);
  const uint64_t desc_v0 = make_desc_fp8_kmajor<Cfg::kVPanelKeys>(smem_base + Cfg::kOffV);

  if constexpr (Cfg::kPingpong) {
    if (wg == Cfg::kConsumers - 1) NamedBarrier::arrive(NamedBarrier::kFirstId + 0, C::kSchedThreads);
  }
  if constexpr (Cfg::kSoftmaxTurns) {
    if (wg == Cfg::kConsumers - 1) NamedBarrier::arrive(C::kSoftmaxTurnId + 0, C::kSchedThreads);
  }

  float s[C::kSRegs];
  float o[C::kORegs];
  // The tensor cores' accumulator of P V: o itself, or with kPromote a per-block one added into o (size 1 without).
  float ob[Cfg::kPromote ? Cfg::kPvCols / 2 : 1];
  auto& pv_acc = pick<Cfg::kPromote>(ob, o);
  uint32_t pa[C::kKSteps][4];
  using Softmax = OnlineSoftmaxFp8<Cfg::kBlockN, Cfg::kPolyExpEvery, softmax_cut(Cfg::kExperiment),
                                   int_row_max(Cfg::kExperiment), Cfg::kMmaRowSum>;
  Softmax softmax;
  TileDescales ds;
  float k_next, v_next;  // descales of the next key block, loaded one block ahead
  float v_pa;            // v_descale of the block whose P is in pa; O is kept in units of it

  // kSplitS: S's registers [0, kSRegs / 2) hold keys [0, kBlockN / 2) in the m64nN accumulator layout (register i:
  // column 8 (i / 4) + 2 q + i % 2), so each half is an m64n(N/2) accumulator of its own; K's second half starts
  // kBlockN / 2 rows (whole 8-row swizzle atoms) into the stage.
  auto& s_lo = *reinterpret_cast<float(*)[C::kSRegs / 2]>(&s[0]);
  auto& s_hi = *reinterpret_cast<float(*)[C::kSRegs / 2]>(&s[C::kSRegs / 2]);
  auto issue_qk = [&]() {
    warpgroup_arrive();
    const uint64_t desc_q = desc_advance(desc_q0, q_state.index * Cfg::kQBytes);
    const uint64_t desc_k = desc_advance(desc_k0, k_state.index * Cfg::kKBytes);
    if constexpr (Cfg::kSplitS) {
      constexpr int kHalf = Cfg::kBlockN / 2;
      gemm_fp8_ss<kHalf, Cfg::kHeadDim, Cfg::kRowBytes, Cfg::kQPanelBytes, Cfg::kKPanelBytes>(s_lo, desc_q, desc_k);
      wgmma_commit();
      gemm_fp8_ss<kHalf, Cfg::kHeadDim, Cfg::kRowBytes, Cfg::kQPanelBytes, Cfg::kKPanelBytes>(
          s_hi, desc_q, desc_advance(desc_k, kHalf * Cfg::kRowBytes));
      wgmma_commit();
    } else {
      gemm_fp8_ss<Cfg::kBlockN, Cfg::kHeadDim, Cfg::kRowBytes, Cfg::kQPanelBytes, Cfg::kKPanelBytes>(s, desc_q,
                                                                                                      desc_k);
      wgmma_commit();
    }
  };
  auto issue_pv = [&]() {
    if constexpr (Cfg::kPvSplit == 1) {
      warpgroup_arrive();
      // kPromote: the block accumulator is dead until this GEMM (its registers serve S meanwhile).
      gemm_fp8_rs<Cfg::kBlockN, Cfg::kPvCols, Cfg::kVPanelKeys, Cfg::kVPanelStride, Cfg::kPromote>(
          pv_acc, pa, desc_advance(desc_v0, v_state.index * Cfg::kVStageBytes));
      wgmma_commit();
    }
  };
  // kPvSplit: P V over head-dim rows [h D/2, (h + 1) D/2) of Vt into ob (rows of kVPanelKeys bytes, 8-row atoms).
  auto issue_pv_half = [&](int h) {
    if constexpr (Cfg::kPvSplit > 1) {
      constexpr int kHalf = Cfg::kHeadDim / Cfg::kPvSplit;
      warpgroup_arrive();
      gemm_fp8_rs<Cfg::kBlockN, kHalf, Cfg::kVPanelKeys, Cfg::kVPanelStride, true>(
          ob, pa, desc_advance(desc_v0, v_state.index * Cfg::kVStageBytes + h * kHalf * Cfg::kVPanelKeys));
      wgmma_commit();
    }
  };
  auto release_k = [&](bool last_of_tile) {
    if (warp_leader) bars.k.consumer_release(k_state);
    if (leader && last_of_tile) bars.q.consumer_release(q_state);
    k_state.advance();
    if (last_of_tile) q_state.advance();
  };
  auto release_v = [&]() {
    if (warp_leader) bars.v.consumer_release(v_state);
    v_state.advance();
  };
  // After the P V that read pa has completed: keeps the compiler from placing the next P's fragments in pa's
  // registers before the wait (the software half of the ordering; wait_group is the hardware half).
  auto fence_pa = [&]() {
#pragma unroll
    for (int k = 0; k < C::kKSteps; ++k) fence_operands(pa[k]);
  };
  auto prefetch_descales = [&](int n_block, int n_blocks) {
    if (n_block < n_blocks) {
      k_next = ds.k_at(n_block);
      v_next = ds.v_at(n_block);
    }
  };
  // Scores of block n_block (descale k_desc) -> 2^8 P in s; o_scale as OnlineSoftmaxFp8::step. first_half_max:
  // kSplitS's early row maxima (its caller has masked s).
  auto softmax_block = [&](const SeqRange& r, int m_block, int n_block, float k_desc, float (&o_scale)[2],
                           const float* first_half_max = nullptr) {
    if (first_half_max == nullptr && block_needs_mask<Cfg>(p, r, m_block, n_block)) c.apply_mask(s, r, m_block, n_block);
    const float factor[2] = {ds.q[0] * k_desc * p.scale_log2, ds.q[1] * k_desc * p.scale_log2};
    if constexpr (skips_softmax(Cfg::kExperiment)) {
#pragma unroll
      for (int i = 0; i < C::kSRegs; ++i) s[i] *= factor[(i >> 1) & 1];
      softmax.row_sum[0] += s[0];
      softmax.row_sum[1] += s[2];
      o_scale[0] = o_scale[1] = 1.f;
    } else {
      softmax.step(s, factor, o_scale, first_half_max);
    }
  };

  // Next tile that has key blocks: from scheduler index `from` on, tiles whose rows attend nothing written here
  // (static deal), or the producer's next published tile (dynamic deal: it publishes tiles with key blocks only and
  // writes the others itself; with those stores here the 256-key kernel spilled 4-28 B).
  auto find_work = [&](int from, WorkTile& w) -> bool {
    if constexpr (Cfg::kDynamic) {
      bars.q.consumer_wait(q_state);
      w.index = static_cast<int>(ld_shared_b32(smem_addr(&bars.tile[q_state.index])));
      if (w.index < 0) return false;
      w.t = sched.decode(w.index);
      w.r = seq_range(p, w.t.batch);
      w.n_blocks = key_block_range<Cfg>(p, w.r, w.t.m_block).count;
      return true;
    } else {
      for (int tile = from; sched.valid(tile); tile = sched.next(tile)) {
        w.index = tile;
        w.t = sched.decode(tile);
        w.r = seq_range(p, w.t.batch);
        if (w.t.m_block * Cfg::kBlockM >= w.r.seqlen_q) continue;
        w.n_blocks = key_block_range<Cfg>(p, w.r, w.t.m_block).count;
        if (w.n_blocks > 0) return true;
        c.store_empty(p, w.r, w.t);
      }
      return false;
    }
  };
  // The tile's descales: this thread's two query rows, and key block 0's (k0, v0; block 1's prefetched).
  auto begin_tile = [&](const WorkTile& w, float& k0, float& v0) {
    const int head_kv = p.group_div.div(w.t.head);
    const float* q_desc =
        params.q_descale + w.t.batch * params.q_descale_batch_stride + w.t.head * params.q_descale_head_stride;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = min(c.row0(w.t.m_block) + 8 * half, w.r.seqlen_q - 1);  // rows past the end: any valid tile
      ds.q[half] = __ldg(q_desc + params.block_q_div.div(row));
    }
    ds.k = params.k_descale + w.t.batch * params.k_descale_batch_stride + head_kv * params.k_descale_head_stride;
    ds.v = params.v_descale + w.t.batch * params.v_descale_batch_stride + head_kv * params.v_descale_head_stride;
    ds.tiles_per_block = params.tiles_per_block;
    prefetch_descales(0, w.n_blocks);
    k0 = k_next;
    v0 = v_next;
    prefetch_descales(1, w.n_blocks);
  };
  auto zero_o = [&]() {
#pragma unroll
    for (int i = 0; i < C::kORegs; ++i) o[i] = 0.f;
  };
  // Block 0 of a tile: Q K^T alone (no P V to overlap with).
  auto first_block = [&](const WorkTile& w) {
    float k0;
    begin_tile(w, k0, v_pa);
    softmax.reset();
    zero_o();
    bars.q.consumer_wait(q_state);
    bars.k.consumer_wait(k_state);
    c.gemm_turn_begin();
    issue_qk();
    c.gemm_turn_end();
    wgmma_wait<0>();
    fence_operands(s);
    release_k(w.n_blocks == 1);
    float o_scale[2];
    softmax_block(w.r, w.t.m_block, 0, k0, o_scale);  // O is zero: nothing to rescale
    p_to_fp8_fragments<Cfg::kBlockN, Cfg::kLinearExpEvery>(s, pa);
  };
  // The steady state (FA3 Algorithm 2): S = Q K_n^T while O += P_{n-1} V_{n-1} runs.
  auto overlapped_step = [&](const WorkTile& w, int n_block) {
    const float k_cur = k_next, v_cur = v_next;
    prefetch_descales(n_block + 1, w.n_blocks);
    bars.k.consumer_wait(k_state);
    bars.v.consumer_wait(v_state);
    c.gemm_turn_begin();
    issue_qk();
    issue_pv();
    c.gemm_turn_end();
    fence_operands(o);
    wgmma_wait<1>();
    fence_operands(s);
    release_k(n_block == w.n_blocks - 1);
    float o_scale[2];
    softmax_block(w.r, w.t.m_block, n_block, k_cur, o_scale);
    if constexpr (Cfg::kExperiment == kPlainPvWait) wgmma_wait<0>();
    else wgmma_wait_after<0>(softmax.row_sum);  // the softmax above runs while P V computes
    fence_operands(o);
    fence_pa();
    release_v();
    // O: units of v_pa -> units of v_cur. A fast divide (2 ulp) instead of IEEE division, whose slow-path call sat
    // in the loop's SASS; equal scales (per-tensor V) stay exactly 1 so the rescale can still be skipped.
    const float v_ratio = v_pa == v_cur ? 1.f : __fdividef(v_pa, v_cur);
    const float factor[2] = {o_scale[0] * v_ratio, o_scale[1] * v_ratio};
    C::rescale(o, factor);
    v_pa = v_cur;
    p_to_fp8_fragments<Cfg::kBlockN, Cfg::kLinearExpEvery>(s, pa);
  };
  // The last P V of a tile, alone.
  auto last_block = [&]() {
    bars.v.consumer_wait(v_state);
    c.gemm_turn_begin();
    issue_pv();
    c.gemm_turn_end();
    wgmma_wait<0>();
    fence_operands(o);
    fence_pa();
    release_v();
  };
  auto store_tile = [&](const WorkTile& w, const float (&inv_sum)[2], const float (&lse)[2], float v_last) {
    const float out_scale[2] = {inv_sum[0] * v_last, inv_sum[1] * v_last};
    if constexpr (Cfg::kTmaStoreO) {
      if (p.store_o_tma != 0) {
        c.store_tma(tma_o, smem + Cfg::kOffO + wg * (Cfg::kOBytes / 2), NamedBarrier::kFirstId + 2 + wg, p, w.r, w.t,
                    o, out_scale, lse);
        return;
      }
    }
    c.store(p, w.r, w.t, o, out_scale, lse);
  };

#ifdef FA3NN_FP8_TRACE
  bool trace_tile = blockIdx.x == 0 && c.tid % 32 == 0;
  auto trace = [&](int n_block, int event) {
    if (trace_tile && n_block < kFp8TraceBlocks) g_fp8_trace[wg][c.tid / 32][n_block][event] = clock64();
  };
  int traced_tiles = 0;
  auto trace_turn = [&](int event) {
    if (blockIdx.x == 0 && c.tid == 0 && traced_tiles < kFp8TraceTiles)
      g_fp8_turn_trace[wg][traced_tiles][event] = clock64();
  };
  auto trace_tile_start = [&](int n_blocks, int m_block) {
    if (blockIdx.x == 0 && c.tid == 0 && traced_tiles < kFp8TraceTiles) {
      g_fp8_tile_trace[wg][traced_tiles][0] = clock64();
      g_fp8_tile_trace[wg][traced_tiles][1] = n_blocks;
      g_fp8_tile_trace[wg][traced_tiles][2] = m_block;
      ++traced_tiles;
    }
  };
#else
  auto trace = [](int, int) {};
  auto trace_tile_start = [](int, int) {};
  auto trace_turn = [](int) {};
#endif
  // qk_to_p: after Q K^T of block n_block was issued: its scores -> P in pa, the factor taking O to its units, and
  // (kMmaRowSum) the one taking the row sums to its maxima.
  auto qk_to_p = [&](const WorkTile& w, int n_block, float k_cur, float v_cur, float (&factor)[2],
                     float (&sum_scale)[2]) {
    float o_scale[2];
    if constexpr (Cfg::kSplitS) {  // the first half's mask and row max while the second half computes
      const bool masked = block_needs_mask<Cfg>(p, w.r, w.t.m_block, n_block);
      wgmma_wait<1>();
      fence_operands(s_lo);
      if (masked) c.template apply_mask<0, C::kSRegs / 2>(s, w.r, w.t.m_block, n_block);
      const float first_half_max[2] = {Softmax::early_max(s, 0), Softmax::early_max(s, 1)};
      // A warp-uniform branch on the early maxima (its body a nanosleep 0, taken only for an infinite score): a
      // basic-block boundary that keeps the first half's max tree above the wait below. Without it ptxas sank the
      // tree below the wait; a wait guarded by a predicate on the maxima (wgmma_wait_after) made ptxas serialize
      // the wgmmas instead (C7514: the second half's scores read after a wait it cannot prove taken).
      if (__any_sync(0xffffffffu, first_half_max[0] == INFINITY || first_half_max[1] == INFINITY))
        asm volatile("nanosleep.u32 0;");
      wgmma_wait<0>();
      fence_operands(s_hi);
      trace(n_block, 5);
      release_k(n_block == w.n_blocks - 1);
      if (masked) c.template apply_mask<C::kSRegs / 2, C::kSRegs / 2>(s, w.r, w.t.m_block, n_block);
      c.softmax_turn_begin();
      softmax_block(w.r, w.t.m_block, n_block, k_cur, o_scale, first_half_max);
      c.softmax_turn_end();
    } else {
      wgmma_wait<0>();
      fence_operands(s);
      trace(n_block, 5);
      release_k(n_block == w.n_blocks - 1);
      softmax_block(w.r, w.t.m_block, n_block, k_cur, o_scale);
    }
    trace(n_block, 6);
    p_to_fp8_fragments<Cfg::kBlockN, Cfg::kLinearExpEvery>(s, pa);
    const float v_ratio = v_pa == v_cur ? 1.f : __fdividef(v_pa, v_cur);
    factor[0] = o_scale[0] * v_ratio;
    factor[1] = o_scale[1] * v_ratio;
    sum_scale[0] = o_scale[0];
    sum_scale[1] = o_scale[1];
    v_pa = v_cur;
    trace(n_block, 7);
  };
  // kOverlap false: one block start to end (Q K^T, softmax, P into pa, P V into the fresh ob, O = O * factor + ob).
  // (first_block, of the overlapped kernels, repeats qk_to_p's lines on purpose: calling a shared helper there moved
  // their register allocation and scheduling, 2312 -> 2304 SASS instructions at d128, detaching them from their
  // measurements. serial_step calling qk_to_p left the promoted kernels' instructions and their order unchanged,
  // registers renamed only: cuobjdump, 2026-12-01 eighth session.)
  auto serial_step = [&](const WorkTile& w, int n_block, float k_cur, float v_cur) {
    if (n_block == 0) bars.q.consumer_wait(q_state);
    bars.k.consumer_wait(k_state);
    c.gemm_turn_begin();
    issue_qk();
    c.gemm_turn_end();
    float factor[2], sum_scale[2];  // O: max of block n-1 and units of v_pa -> block n's (0 at block 0: O is zero)
    qk_to_p(w, n_block, k_cur, v_cur, factor, sum_scale);
    bars.v.consumer_wait(v_state);
    if constexpr (Cfg::kPromote) {  // (serial steps exist with kPromote only)
#pragma unroll
      for (int h = 0; h < Cfg::kPvSplit; ++h) {
        c.gemm_turn_begin();
        if constexpr (Cfg::kPvSplit == 1) issue_pv();
        else issue_pv_half(h);
        c.gemm_turn_end();
        wgmma_wait<0>();
        fence_operands(ob);
        C::rescale_add(o, factor, ob, h * (C::kORegs / Cfg::kPvSplit));
      }
    }
    fence_pa();
    release_v();
  };

  // kFusedTurn: one turn per block. serial_step takes two (Q K^T, then P V after the softmax), and the turns
  // alternate, so each warpgroup's P V waits for the other's Q K^T and both run their softmax at once: the tensor
  // cores idle for (softmax - GEMM) per block pair whenever the softmax is the longer. Here a turn holds P V of block
  // n-1 (its wait and the FFMA into O included: the block accumulator is free again before the next P V) and Q K^T
  // of block n, and the other warpgroup's softmax runs meanwhile.
  // pv_into_o: P V of the block in pa into ob, O = O * factor + ob; then pa and the V stage are free.
  // The FFMAs of the promotion and the next Q K^T's QGMMAs: ptxas interleaves them, so the block accumulator gets
  // registers beside S instead of S's. Fine at d64 and at d128 with 128-key blocks; the 192-key form spilled 20-28 B
  // (the tile's batch, head and rows, kept across the key loop for the store: decoded again after it now, 0 spills);
  // the 256-key and the d256 forms spilled 260-352 B until the K stage wait moved between the two (kKWaitInTurn).
  // Naming S's first registers as the accumulator (a reference into s) also forces the order, but ptxas then
  // serializes the 192-key kernel's wgmma (C7511) (NOTES, 2026-12-01 eighth, 2026-12-02 ninth and eleventh sessions).
  // kMmaRowSum: the block's row sums (registers kORegs and kORegs + 2 of ob: rows r0 and r1) into the softmax's.
  auto pv_into_o = [&](const float (&factor)[2], const float (&sum_scale)[2]) {
    if constexpr (Cfg::kFused) {
#pragma unroll
      for (int h = 0; h < Cfg::kPvSplit; ++h) {
        if constexpr (Cfg::kPvSplit == 1) issue_pv();
        else issue_pv_half(h);
        wgmma_wait<0>();
        fence_operands(ob);
        C::rescale_add(o, factor, ob, h * (C::kORegs / Cfg::kPvSplit));
        if constexpr (Cfg::kMmaRowSum) softmax.add_block_sums(sum_scale, ob[C::kORegs], ob[C::kORegs + 2]);
      }
      fence_pa();
      release_v();
    }
  };
  // A promoted tile's start: descales (block 0's in k0, v0), O in block 0's units, softmax state and O reset.
  auto start_promoted_tile = [&](const WorkTile& w, float& k0, float& v0) {
    begin_tile(w, k0, v0);
    v_pa = v0;
    softmax.reset();
    zero_o();
  };
  auto fused_tile = [&](const WorkTile& w) {
    float k0, v0, factor[2], sum_scale[2];
    start_promoted_tile(w, k0, v0);
    bars.q.consumer_wait(q_state);
    bars.k.consumer_wait(k_state);
    c.gemm_turn_begin();
    issue_qk();
    c.gemm_turn_end();
    qk_to_p(w, 0, k0, v0, factor, sum_scale);
    for (int n_block = 1; n_block < w.n_blocks; ++n_block) {
      const float k_cur = k_next, v_cur = v_next;
      trace(n_block, 0);
      if constexpr (!Cfg::kKWaitInTurn) bars.k.consumer_wait(k_state);
      bars.v.consumer_wait(v_state);
      trace(n_block, 1);
      c.gemm_turn_begin();
      trace(n_block, 2);
      pv_into_o(factor, sum_scale);
      trace(n_block, 3);
      if constexpr (Cfg::kKWaitInTurn) bars.k.consumer_wait(k_state);
      trace(n_block, 8);
      issue_qk();
      c.gemm_turn_end();
      trace(n_block, 4);
      prefetch_descales(n_block + 1, w.n_blocks);  // the next block's descales, loaded under this softmax
      qk_to_p(w, n_block, k_cur, v_cur, factor, sum_scale);
    }
    bars.v.consumer_wait(v_state);
    c.gemm_turn_begin();
    pv_into_o(factor, sum_scale);
    c.gemm_turn_end();
  };

  WorkTile cur;
  if constexpr (Cfg::kCrossTile) {  // the fused turns of every tile as one chain (Fp8FwdConfig::kCrossTile)
    if (!find_work(sched.first(), cur)) return;
    float k0, v0, factor[2], sum_scale[2];
    start_promoted_tile(cur, k0, v0);
    bars.q.consumer_wait(q_state);
    bars.k.consumer_wait(k_state);
    c.gemm_turn_begin();
    trace_tile_start(cur.n_blocks, cur.t.m_block);
    issue_qk();
    c.gemm_turn_end();
    qk_to_p(cur, 0, k0, v0, factor, sum_scale);
    // Each tile's key loop is fused_tile's; at its end, unless it was the last tile, one turn holds the tile's last
    // P V and the next tile's first Q K^T, with the tile's store between them (stored after the turn, O packed to
    // bf16 spilled 176-248 B beside S in flight). The loop leaves before that turn, never around its wgmmas: a
    // wgmma under a branch made ptxas serialize them all (C7518). fused_tile's lines are repeated here on purpose:
    // moved into helpers that both call, they changed the SASS of every fused kernel (24240 lines at d128, 238 at d64,
    // 144 at d256; scripts/sass_identical.sh), detaching those kernels from their measurements.
    for (;;) {
      for (int n_block = 1; n_block < cur.n_blocks; ++n_block) {
        const float k_cur = k_next, v_cur = v_next;
        trace(n_block, 0);
        bars.v.consumer_wait(v_state);
        trace(n_block, 1);
        c.gemm_turn_begin();
        trace(n_block, 2);
        pv_into_o(factor, sum_scale);
        trace(n_block, 3);
        bars.k.consumer_wait(k_state);  // (kKWaitInTurn)
        trace(n_block, 8);
        issue_qk();
        c.gemm_turn_end();
        trace(n_block, 4);
        prefetch_descales(n_block + 1, cur.n_blocks);
        qk_to_p(cur, n_block, k_cur, v_cur, factor, sum_scale);
      }
#ifdef FA3NN_FP8_TRACE
      trace_tile = false;  // (the trace records the first tile's key blocks only)
#endif
      trace_turn(0);
      WorkTile next;
      if (!find_work(sched.next(cur.index), next)) break;
      const float v_last = v_pa;
      begin_tile(next, k0, v0);  // (no state of this tile's is read after its last qk_to_p but v_pa)
      trace_turn(1);
      bars.v.consumer_wait(v_state);
      trace_turn(2);
      c.gemm_turn_begin();
      trace_turn(3);
      pv_into_o(factor, sum_scale);
      trace_turn(4);
      float inv_sum[2], lse[2];
      softmax.finalize(inv_sum, lse);
      cur.t = sched.decode(cur.index);  // (kDecodeTileAfterLoop)
      cur.r = seq_range(p, cur.t.batch);
      store_tile(cur, inv_sum, lse, v_last);
      trace_turn(5);
      cur = next;
      v_pa = v0;
      softmax.reset();
      zero_o();
      bars.q.consumer_wait(q_state);
      bars.k.consumer_wait(k_state);
      trace_turn(6);
      trace_tile_start(cur.n_blocks, cur.t.m_block);
      issue_qk();
      c.gemm_turn_end();
      qk_to_p(cur, 0, k0, v0, factor, sum_scale);
    }
    bars.v.consumer_wait(v_state);  // the last tile's last block
    c.gemm_turn_begin();
    pv_into_o(factor, sum_scale);
    c.gemm_turn_end();
    float inv_sum[2], lse[2];
    softmax.finalize(inv_sum, lse);
    cur.t = sched.decode(cur.index);
    cur.r = seq_range(p, cur.t.batch);
    store_tile(cur, inv_sum, lse, v_pa);
    trace_tile_start(-1, -1);
    if constexpr (Cfg::kTmaStoreO) {
      if (c.tid == 0) tma_store_wait<0>();  // (no bulk store may outlive its shared-memory source)
    }
  } else {
    for (int from = sched.first(); find_work(from, cur); from = sched.next(cur.index)) {
      if constexpr (Cfg::kFused) {
        fused_tile(cur);
#ifdef FA3NN_FP8_TRACE
        trace_tile = false;
#endif
        if constexpr (Cfg::kDecodeTileAfterLoop) {
          cur.t = sched.decode(cur.index);
          cur.r = seq_range(p, cur.t.batch);
        }
      } else if constexpr (!Cfg::kOverlap) {
        float k0, v0;
        start_promoted_tile(cur, k0, v0);  // block 1's descales in k_next / v_next
        serial_step(cur, 0, k0, v0);
        for (int n_block = 1; n_block < cur.n_blocks; ++n_block) {
          const float k_cur = k_next, v_cur = v_next;
          prefetch_descales(n_block + 1, cur.n_blocks);
          serial_step(cur, n_block, k_cur, v_cur);
        }
      } else {
        first_block(cur);
        for (int n_block = 1; n_block < cur.n_blocks; ++n_block) overlapped_step(cur, n_block);
        last_block();
      }
      float inv_sum[2], lse[2];
      softmax.finalize(inv_sum, lse);
      store_tile(cur, inv_sum, lse, v_pa);
    }
  }
}

// kMmaRowSum: the rows of ones after every Vt panel of every stage (e4m3 1.0 = 0x38; equal bytes, so the swizzle
// does not matter), written by all threads and fenced for the async proxy that the wgmma reads through.
template <class Cfg>
__device__ __forceinline__ void write_vt_ones(uint8_t* smem) {
  constexpr uint32_t kWords = Cfg::kOnesBytes / 4;
  for (uint32_t i = threadIdx.x; i < Cfg::kStages * Cfg::kVPanels * kWords; i += Cfg::kThreads) {
    const uint32_t panel = i / kWords;  // stage * kVPanels + panel in the stage
    *reinterpret_cast<uint32_t*>(smem + Cfg::kOffV + panel * Cfg::kVPanelStride + Cfg::kVPanelBytes +
                                 4 * (i % kWords)) = 0x38383838u;
  }
  fence_proxy_async_smem();
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_fwd_fp8_kernel(const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
                         const __grid_constant__ CUtensorMap tma_vt, const Fp8FwdParams params) {
  uint8_t* smem = aligned_dynamic_smem();
  auto& bars = *reinterpret_cast<typename Cfg::Barriers*>(smem + Cfg::kOffBarriers);
  if constexpr (Cfg::kMmaRowSum) write_vt_ones<Cfg>(smem);  // made visible by warp_specialize's CTA sync
  warp_specialize<Cfg>(
      bars,
      [&] {
        if (threadIdx.x / 32 == 0 && elect_one())
          fp8_producer_loop<Cfg>(&tma_q, &tma_k, &tma_vt, params.base, params.vt_starts, smem, bars);
      },
      [&](int consumer) { fp8_consumer_loop<Cfg>(params, smem, bars, consumer, nullptr); });
}

// kTmaStoreO: the same kernel with O's tensor map (flash_fwd_fp8_kernel's lines, repeated so that its SASS stays).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_fwd_fp8_tma_store_kernel(const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
                                   const __grid_constant__ CUtensorMap tma_vt, const __grid_constant__ CUtensorMap tma_o,
                                   const Fp8FwdParams params) {
  uint8_t* smem = aligned_dynamic_smem();
  auto& bars = *reinterpret_cast<typename Cfg::Barriers*>(smem + Cfg::kOffBarriers);
  if constexpr (Cfg::kMmaRowSum) write_vt_ones<Cfg>(smem);
  warp_specialize<Cfg>(
      bars,
      [&] {
        if (threadIdx.x / 32 == 0 && elect_one())
          fp8_producer_loop<Cfg>(&tma_q, &tma_k, &tma_vt, params.base, params.vt_starts, smem, bars);
      },
      [&](int consumer) { fp8_consumer_loop<Cfg>(params, smem, bars, consumer, &tma_o); });
}

}  // namespace fa3nn::hopper
