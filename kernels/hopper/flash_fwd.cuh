// FlashAttention forward for Hopper: one producer warpgroup (TMA) and two consumer warpgroups (wgmma + online
// softmax), persistent over (m_block, head, batch) tiles.
//
//   producer (warpgroup 0, one elected thread): per tile, Q once, then K_n and V_n for n = last .. first into a
//       two-stage ring of each; gives its registers away (setmaxnreg.dec).
//   consumer c (warpgroups 1, 2): 64 query rows each of the 128-row tile. S = Q K^T (both operands in shared memory),
//       online softmax in registers, O += P V (P from registers). With kOverlap the next tile's Q K^T is issued before
//       the current P V, and the softmax of S_next runs while P V is on the tensor cores (FA3 Algorithm 2). With
//       kPingpong two named barriers make the warpgroups take turns issuing GEMMs, so one's softmax overlaps the
//       other's GEMMs.
//
// Key blocks are visited last-first: under a causal mask the blocks that straddle the diagonal (and the ragged last
// block) come first and are the only ones masked; blocks entirely above the diagonal are never loaded. Out-of-range
// rows of a tile arrive as zeros from TMA (dense) or as the next sequence's rows (varlen); either way their columns
// are masked and their rows are never stored.
//
// Epilogue (kTmaStoreO, dense calls): each consumer writes its 64 normalized O rows into its own rows of the tile's
// Q stage (done with Q by then), fences, and one thread issues TMA stores that run while the warpgroup starts the
// next tile; the Q stage goes back to the producer once the stores have read it. Varlen calls, Q1 configs and d64
// store O from registers (store_o_direct).
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mbarrier.cuh"
#include "named_barrier.cuh"
#include "pack16.cuh"
#include "pipeline.cuh"
#include "regs.cuh"
#include "scheduler.cuh"
#include "shared_store.cuh"
#include "softmax.cuh"
#include "tma.cuh"
#include "warp_specialized.cuh"
#include "wgmma.cuh"

namespace fa3nn::hopper {

// The forward's rings (bf16 and FP8): Q per tile, K and V per key block; every consumer warpgroup releases each stage,
// the Q stage once (its thread 0), each K and V stage kKVReleases times (1: thread 0; 4: every warp's lane 0, the
// FP8 kernel's choice, Fp8FwdConfig::Barriers says why).
template <int kQStages, int kStages, uint32_t kKVReleases = 1>
struct FwdBarriers {
  Pipeline<kQStages> q;
  Pipeline<kStages> k, v;

  __device__ __forceinline__ void init(uint32_t consumers) {
    q.init(consumers);
    k.init(consumers * kKVReleases);
    v.init(consumers * kKVReleases);
  }

  // Diagnostic builds only (kSkipKVLoads, wrong results): one key block's K and V stages handed to the consumers
  // without loading them, which times a kernel with its L2 -> shared-memory K/V traffic removed.
  __device__ __forceinline__ void signal_kv_unloaded(PipelineState<kStages>& k_state,
                                                     PipelineState<kStages>& v_state) {
    k.producer_wait_empty(k_state);
    k.full[k_state.index].arrive();
    k_state.advance();
    v.producer_wait_empty(v_state);
    v.full[v_state.index].arrive();
    v_state.advance();
  }
};

// The dynamic deal's rings (FwdConfig::kDynamic, Fp8FwdConfig::kDynamic): FwdBarriers plus one published tile index per Q stage, written by
// the producer before its arrival on the stage's full barrier (which releases it with the Q load) and read by the
// consumers after their wait on it; -1 says no tile is left.
template <int kQStages, int kStages, uint32_t kKVReleases = 1>
struct FwdTileBarriers : FwdBarriers<kQStages, kStages, kKVReleases> {
  int tile[kQStages];
};

struct FwdParams {
  void* out;
  float* lse;
  const int* cu_seqlens_q;  // null for dense batches
  const int* cu_seqlens_k;
  int64_t out_batch_stride, out_row_stride, out_head_stride;  // elements
  int64_t lse_batch_stride, lse_head_stride;
  int batch, seqlen_q, seqlen_k;  // dense: the lengths; varlen: unused (read from cu_seqlens)
  int nheads, group;              // group = nheads / nheads_kv
  FastDiv group_div;              // group, for head -> K/V head once per tile
  int num_m_blocks;
  int heads_per_section;  // causal schedule: (batch, head) pairs per longest-first section (scheduler.cuh)
  int boustrophedon;      // causal schedule: 1 deals odd rounds of tiles in reversed CTA order (scheduler.cuh)
  TileDeal deal;          // the above with the launch's grid and their divisors: what the kernel's scheduler reads
  int store_o_tma;        // 1: O leaves through shared memory with TMA stores (dense calls, kTmaStoreO builds)
  float scale_log2;       // softmax_scale * log2(e)
  float rescale_log2;     // bf16 forward: how far a row maximum may rise before O is rescaled (OnlineSoftmax::step)
  // kLocal: query row i sees key j iff i + off - window_left <= j <= i + off + window_right, off = seqlen_k -
  // seqlen_q, -1 unbounded (fa3nn/masks.py); causal calls come as right = 0.
  int window_left, window_right;
  float softcap_pre;  // kSoftcap: softmax_scale / softcap (softcap_scores; scale_log2 is then softcap * log2 e)
  // Attention sinks (gpt-oss): one logit per query head, natural-log units of the scaled scores, joining every row's
  // softmax without a value (OnlineSoftmax::finalize); null for none. bf16 / fp16 forward only.
  const float* sinks;
  // FwdConfig::kDynamic (varlen calls): tiles after a CTA's first (blockIdx.x) are taken from this counter, zeroed by
  // the launcher before each launch, in the deal's order; num_tiles = num_m_blocks * batch * nheads.
  int* tile_counter;
  int num_tiles;
};

// kSkipKVLoads is a diagnostic only (wrong results): the producer signals K/V stages without loading them, which
// measures the kernel with its L2 -> shared-memory traffic removed.
// kQStages = 2 double-buffers Q, so the next tile's Q loads while this tile still computes; kCrossTile (needs
// kOverlap) pipelines across tiles: the next tile's first Q K^T is issued together with this tile's last P V.
// kLocal: sliding windows (FwdParams::window_left / window_right; kCausal off, the window bounds both sides): each
// tile visits the key blocks its rows' windows reach (key_block_range) and masks both bounds. kSoftcap: scores capped
// (softcap_scores, softmax.cuh) before the mask.
template <int kHeadDim_, int kBlockN_, int kStages_, bool kBF16_, bool kCausal_, bool kPingpong_ = true,
          bool kOverlap_ = true, int kConsumers_ = 2, bool kSkipKVLoads_ = false, int kQStages_ = 1,
          bool kCrossTile_ = true, bool kIntMax_ = false, bool kLocal_ = false, bool kSoftcap_ = false,
          int kHeadDimV_ = kHeadDim_, bool kDynamic_ = false>
struct FwdConfig {
  static constexpr bool kIntMax = kIntMax_;  // the row max from integer maxes (OnlineSoftmax, softmax.cuh)
  static constexpr bool kLocal = kLocal_, kSoftcap = kSoftcap_;
  static_assert(!(kLocal && kCausal_), "a window takes causal as its right bound 0");
  // kHeadDim: Q and K's head dim; kHeadDimV: V's and O's (DeepSeek's multi-head latent attention in its training
  // form: 192 / 128), at most kHeadDim (O leaves through the Q stage's first kPanelsV panels).
  static constexpr int kHeadDim = kHeadDim_, kHeadDimV = kHeadDimV_;
  static constexpr int kBlockN = kBlockN_, kStages = kStages_, kQStages = kQStages_;
  static_assert(kHeadDimV <= kHeadDim && kHeadDimV % kPanelCols == 0, "V's head dim: a multiple of 64, at most Q's");
  static constexpr bool kBF16 = kBF16_, kCausal = kCausal_, kPingpong = kPingpong_, kOverlap = kOverlap_;
  static constexpr bool kSkipKVLoads = kSkipKVLoads_, kCrossTile = kCrossTile_ && kOverlap_;
  // The TMA-store epilogue writes each warpgroup's O into its own rows of the finished tile's Q stage, so it needs a
  // second Q stage for the next tile (no extra shared memory; Q1 configs have none to spare: d128 128 x 176 uses 208
  // of 227 KB, d256 224) and is built for the cross-tile loop, the default. Measured on the H200 against the direct
  // stores, same run (benchmarks/NOTES.md, v7): d128 128 x 128 tiles +10% at seqlen 512, +6% causal 512, +5% causal
  // 2048; d64 -1% to -7% at every length (half the O bytes per row to save, the same barrier, fence and delayed Q
  // release), so d64 keeps the direct stores.
  static constexpr bool kTmaStoreO = kQStages == 2 && kCrossTile && kHeadDimV >= 128;
  static constexpr int kConsumers = kConsumers_;  // consumer warpgroups, 64 query rows each
  static constexpr int kBlockM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // Register split (64K per SM, one CTA per SM): 2 consumers: 128*24 + 256*240 = 64,512; 3: 128*32 + 384*160 = 65,536.
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  static constexpr int kPanels = kHeadDim / kPanelCols;    // of Q and K
  static constexpr int kPanelsV = kHeadDimV / kPanelCols;  // of V and O
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2;
  static constexpr uint32_t kKBytes = kBlockN * kHeadDim * 2;   // one K stage
  static constexpr uint32_t kVBytes = kBlockN * kHeadDimV * 2;  // one V stage
  static constexpr uint32_t kQPanelBytes = kBlockM * kPanelRowBytes;
  static constexpr uint32_t kKVPanelBytes = kBlockN * kPanelRowBytes;  // a K or V panel
  static_assert(kHeadDim % kPanelCols == 0 && kBlockN % 16 == 0, "tile shape");
  static_assert(kKVPanelBytes % 1024 == 0 && kQPanelBytes % 1024 == 0, "SW128 panels must stay 1024-B aligned");

  // The dynamic deal (varlen calls; launch() picks Dynamic where FwdParams::tile_counter is set): the producer takes
  // each tile after its CTA's first from a global counter (FwdParams::tile_counter) and publishes it with its Q stage
  // (FwdTileBarriers), so the CTAs that finish first take the next tiles. The static deal (tile + gridDim.x) gives
  // each CTA a fixed share of the tiles whatever their lengths: with packed sequences of mixed lengths some CTAs draw
  // more long tiles (scripts/fwd_varlen_balance.py).
  static constexpr bool kDynamic = kDynamic_;
  static_assert(!kDynamic || (kCrossTile && !kSkipKVLoads), "the dynamic deal is built for the cross-tile loop");
  using Dynamic = FwdConfig<kHeadDim_, kBlockN_, kStages_, kBF16_, kCausal_, kPingpong_, kOverlap_, kConsumers_,
                            kSkipKVLoads_, kQStages_, kCrossTile_, kIntMax_, kLocal_, kSoftcap_, kHeadDimV_, true>;
  using Barriers = std::conditional_t<kDynamic, FwdTileBarriers<kQStages, kStages>, FwdBarriers<kQStages, kStages>>;
  // Shared memory, from a 1024-B aligned base: Q stages | K stages | V stages | barriers.
  static constexpr uint32_t kOffK = kQStages * kQBytes;
  static constexpr uint32_t kOffV = kOffK + kStages * kKBytes;
  static constexpr uint32_t kOffBarriers = kOffV + kStages * kVBytes;
  static constexpr uint32_t kSmemBytes = kOffBarriers + sizeof(Barriers) + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 232448, "exceeds Hopper's 227 KB of shared memory per block");
};

struct SeqRange {
  int q_start, k_start;    // row offsets into the (packed) tensors
  int seqlen_q, seqlen_k;
  int batch_coord;         // TMA batch coordinate (0 for varlen: one packed batch)
};

__device__ __forceinline__ SeqRange seq_range(const FwdParams& p, int batch) {
  SeqRange r;
  if (p.cu_seqlens_q != nullptr) {
    r.q_start = p.cu_seqlens_q[batch];
    r.seqlen_q = p.cu_seqlens_q[batch + 1] - r.q_start;
    r.k_start = p.cu_seqlens_k[batch];
    r.seqlen_k = p.cu_seqlens_k[batch + 1] - r.k_start;
    r.batch_coord = 0;
  } else {
    r.q_start = r.k_start = 0;
    r.seqlen_q = p.seqlen_q;
    r.seqlen_k = p.seqlen_k;
    r.batch_coord = batch;
  }
  return r;
}

// The key blocks tile m_block visits: [first, first + count). Keys beyond the causal diagonal (or the window's right
// bound) of its last row and, under a window (Cfg::kLocal), before the left bound of its first row are skipped.
// first is 0 but under a window; count <= 0: the tile's rows attend no key. (The bf16 and FP8 forwards.)
struct KeyBlocks {
  int first, count;
};

template <class Cfg>
__device__ __forceinline__ KeyBlocks key_block_range(const FwdParams& p, const SeqRange& r, int m_block) {
  const int off = r.seqlen_k - r.seqlen_q;
  int keys = r.seqlen_k;
  if constexpr (Cfg::kCausal) {
    const int last_row = min(r.seqlen_q, (m_block + 1) * Cfg::kBlockM) - 1;
    keys = min(keys, max(0, last_row + off + 1));
  }
  int first = 0;
  if constexpr (Cfg::kLocal) {
    const int last_row = min(r.seqlen_q, (m_block + 1) * Cfg::kBlockM) - 1;
    if (p.window_right >= 0) keys = min(keys, max(0, last_row + off + p.window_right + 1));
    if (p.window_left >= 0) first = max(0, m_block * Cfg::kBlockM + off - p.window_left) / Cfg::kBlockN;
  }
  return {first, (keys + Cfg::kBlockN - 1) / Cfg::kBlockN - first};
}

// Whether key block n has any masked column for some row of tile m_block (ragged end, crossing the diagonal, or
// under a window crossing either bound).
template <class Cfg>
__device__ __forceinline__ bool block_needs_mask(const FwdParams& p, const SeqRange& r, int m_block, int n_block) {
  const int end = (n_block + 1) * Cfg::kBlockN;
  bool need = end > r.seqlen_k;
  if constexpr (Cfg::kCausal) need |= end - 1 > m_block * Cfg::kBlockM + r.seqlen_k - r.seqlen_q;
  if constexpr (Cfg::kLocal) {
    const int off = r.seqlen_k - r.seqlen_q;
    need |= p.window_right >= 0 && end - 1 > m_block * Cfg::kBlockM + off + p.window_right;
    need |= p.window_left >= 0 && n_block * Cfg::kBlockN < (m_block + 1) * Cfg::kBlockM - 1 + off - p.window_left;
  }
  return need;
}

template <class Cfg>
__device__ __forceinline__ void producer_loop(const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                                              const CUtensorMap* tma_v, const FwdParams& p, uint8_t* smem,
                                              typename Cfg::Barriers& bars) {
  tma_prefetch_descriptor(tma_q);
  tma_prefetch_descriptor(tma_k);
  tma_prefetch_descriptor(tma_v);
  StaticPersistentScheduler<Cfg::kCausal> sched(p.deal);
  PipelineState<Cfg::kStages> k_state, v_state;
  PipelineState<Cfg::kQStages> q_state;
  // Q (its stage acquired by the caller, which publishes the tile there first under the dynamic deal), then K_n and
  // V_n for the tile's key blocks, last first.
  auto load_tile = [&](const Tile& t, const SeqRange& r, const KeyBlocks& blocks, int head_kv) {
    bars.q.full[q_state.index].arrive_expect_tx(Cfg::kQBytes);
    uint8_t* q_dst = smem + q_state.index * Cfg::kQBytes;
#pragma unroll
    for (int panel = 0; panel < Cfg::kPanels; ++panel)
      tma_load_4d(tma_q, bars.q.full_barrier(q_state), q_dst + panel * Cfg::kQPanelBytes, panel * kPanelCols,
                  r.q_start + t.m_block * Cfg::kBlockM, t.head, r.batch_coord);
    q_state.advance();

    for (int n_block = blocks.first + blocks.count - 1; n_block >= blocks.first; --n_block) {
      const int row = r.k_start + n_block * Cfg::kBlockN;
      if constexpr (Cfg::kSkipKVLoads) {
        bars.signal_kv_unloaded(k_state, v_state);
        continue;
      }
      bars.k.producer_acquire(k_state, Cfg::kKBytes);
      uint8_t* k_dst = smem + Cfg::kOffK + k_state.index * Cfg::kKBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanels; ++panel)
        tma_load_4d(tma_k, bars.k.full_barrier(k_state), k_dst + panel * Cfg::kKVPanelBytes, panel * kPanelCols, row,
                    head_kv, r.batch_coord);
      k_state.advance();

      bars.v.producer_acquire(v_state, Cfg::kVBytes);
      uint8_t* v_dst = smem + Cfg::kOffV + v_state.index * Cfg::kVBytes;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanelsV; ++panel)
        tma_load_4d(tma_v, bars.v.full_barrier(v_state), v_dst + panel * Cfg::kKVPanelBytes, panel * kPanelCols, row,
                    head_kv, r.batch_coord);
      v_state.advance();
    }
  };
  if constexpr (Cfg::kDynamic) {
    // Every tile with rows is published in a Q stage, also one whose rows attend no key (no Q loaded: the arrival
    // completes the phase; the consumers write its zeros and release the stage). The next index is taken as a tile
    // starts, so the atomic's round trip runs under the tile's loads.
    for (int tile = sched.first(); sched.valid(tile);) {
      // p.deal.grid is gridDim.x, read from the parameters: gridDim.x itself was held in a register across the loop
      // and spilled 4 B in the window kernels (24 producer registers).
      const int next = p.deal.grid + atomicAdd(p.tile_counter, 1);
      const Tile t = sched.decode(tile);
      const SeqRange r = seq_range(p, t.batch);
      if (t.m_block * Cfg::kBlockM < r.seqlen_q) {
        const KeyBlocks blocks = key_block_range<Cfg>(p, r, t.m_block);
        bars.q.producer_wait_empty(q_state);
        bars.tile[q_state.index] = tile;
        if (blocks.count > 0) {
          load_tile(t, r, blocks, p.group_div.div(t.head));  // K/V head after the wait: 0 spills (before: 4 B)
        } else {
          bars.q.full[q_state.index].arrive();
          q_state.advance();
        }
      }
      tile = next;
    }
    bars.q.producer_wait_empty(q_state);
    bars.tile[q_state.index] = -1;
    bars.q.full[q_state.index].arrive();
  } else {
    for (int tile = sched.first(); sched.valid(tile); tile = sched.next(tile)) {
      const Tile t = sched.decode(tile);
      const SeqRange r = seq_range(p, t.batch);
      if (t.m_block * Cfg::kBlockM >= r.seqlen_q) continue;
      const KeyBlocks blocks = key_block_range<Cfg>(p, r, t.m_block);
      if (blocks.count <= 0) continue;
      const int head_kv = p.group_div.div(t.head);
      bars.q.producer_wait_empty(q_state);
      load_tile(t, r, blocks, head_kv);
    }
  }
}

// Consumer-side helpers. `tid` is the thread's index in its warpgroup.
template <class Cfg>
struct Consumer {
  static constexpr int kSRegs = Cfg::kBlockN / 2;
  static constexpr int kORegs = Cfg::kHeadDimV / 2;
  static constexpr int kKSteps = Cfg::kBlockN / 16;
  static constexpr uint32_t kSchedThreads = 2 * 128;  // the waiting warpgroup + the one that hands over the turn

  int wg;   // consumer index 0 .. kConsumers-1
  int tid;  // 0..127
  bool leader;

  // Pingpong: consumer warpgroups take turns (0, 1, .., 0, ...) issuing their GEMMs, each waiting on its own named
  // barrier until the previous one has issued, so one's softmax runs while another's GEMMs use the tensor cores.
  __device__ __forceinline__ void gemm_turn_begin() const {
    if constexpr (Cfg::kPingpong) NamedBarrier::sync(NamedBarrier::kFirstId + wg, kSchedThreads);
  }
  __device__ __forceinline__ void gemm_turn_end() const {
    if constexpr (Cfg::kPingpong)
      NamedBarrier::arrive(NamedBarrier::kFirstId + (wg + 1) % Cfg::kConsumers, kSchedThreads);
  }

  __device__ __forceinline__ void apply_mask(float (&s)[kSRegs], const FwdParams& p, const SeqRange& r, int m_block,
                                            int n_block) const {
    const int quad_col = 2 * (tid % 4);
    const int row0 = m_block * Cfg::kBlockM + wg * 64 + (tid / 32) * 16 + (tid % 32) / 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int limit = r.seqlen_k - n_block * Cfg::kBlockN;  // columns < limit (block-relative) are attended
      if constexpr (Cfg::kCausal) limit = min(limit, row0 + 8 * half + r.seqlen_k - r.seqlen_q + 1 - n_block * Cfg::kBlockN);
      int lower = 0;  // kLocal: and columns >= lower
      if constexpr (Cfg::kLocal) {
        const int diag = row0 + 8 * half + r.seqlen_k - r.seqlen_q - n_block * Cfg::kBlockN;
        if (p.window_right >= 0) limit = min(limit, diag + p.window_right + 1);
        if (p.window_left >= 0) lower = diag - p.window_left;
      }
#pragma unroll
      for (int i = 0; i < kSRegs; ++i) {
        if (((i >> 1) & 1) != half) continue;
        const int col = 8 * (i >> 2) + quad_col + (i & 1);
        if (col >= limit || (Cfg::kLocal && col < lower)) s[i] = -INFINITY;
      }
    }
  }

  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return pack_16x2<Cfg::kBF16>(lo, hi); }

  // The S accumulator of a 64 x 16 slice is exactly the A-fragment layout of m64nNk16, so P needs no shuffles.
  __device__ __forceinline__ static void to_a_fragments(const float (&s)[kSRegs], uint32_t (&a)[kKSteps][4]) {
#pragma unroll
    for (int k = 0; k < kKSteps; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[k][j] = pack(s[8 * k + 2 * j], s[8 * k + 2 * j + 1]);
  }

  // Rescale O to the new row maxima. Once the maxima settle (most key blocks of a long row) every factor is exactly
  // 1, and the warp skips the D/2 multiplies.
  __device__ __forceinline__ static void rescale(float (&o)[kORegs], const float (&o_scale)[2]) {
    if (!__any_sync(0xffffffff, o_scale[0] != 1.f || o_scale[1] != 1.f)) return;
#pragma unroll
    for (int i = 0; i < kORegs; ++i) o[i] *= o_scale[(i >> 1) & 1];
  }

  __device__ __forceinline__ int row_in_warpgroup(int half) const { return (tid / 32) * 16 + (tid % 32) / 4 + 8 * half; }

  __device__ __forceinline__ void store_lse(const FwdParams& p, const SeqRange& r, const Tile& t,
                                            const float (&lse)[2]) const {
    if (tid % 4 != 0) return;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = t.m_block * Cfg::kBlockM + wg * 64 + row_in_warpgroup(half);
      if (row < r.seqlen_q) p.lse[t.batch * p.lse_batch_stride + t.head * p.lse_head_stride + r.q_start + row] = lse[half];
    }
  }

  // O from registers to global memory, 4 bytes per store, rows past the sequence skipped. Varlen calls take this
  // path: a TMA box clips only at the packed tensor's end and would overwrite the next sequence's first rows.
  __device__ __forceinline__ void store_o_direct(const FwdParams& p, const SeqRange& r, const Tile& t,
                                                 const float (&o)[kORegs], const float (&inv_sum)[2]) const {
    using Elem = uint16_t;
    Elem* out = static_cast<Elem*>(p.out) + t.batch * p.out_batch_stride + t.head * p.out_head_stride;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = t.m_block * Cfg::kBlockM + wg * 64 + row_in_warpgroup(half);
      if (row >= r.seqlen_q) continue;
      Elem* out_row = out + static_cast<int64_t>(r.q_start + row) * p.out_row_stride + 2 * (tid % 4);
#pragma unroll
      for (int j = 0; j < kORegs / 4; ++j) {
        const int i = 4 * j + 2 * half;
        *reinterpret_cast<uint32_t*>(out_row + 8 * j) = pack(o[i] * inv_sum[half], o[i + 1] * inv_sum[half]);
      }
    }
  }

  __device__ __forceinline__ void store(const FwdParams& p, const SeqRange& r, const Tile& t, const float (&o)[kORegs],
                                        const float (&inv_sum)[2], const float (&lse)[2]) const {
    store_o_direct(p, r, t, o, inv_sum);
    store_lse(p, r, t, lse);
  }

  // Normalized O into this warpgroup's 64 rows of SW128 panels (the layout one 64 x 64 TMA box reads): element
  // (row, col) sits in panel col / 64 at byte row * 128 + ((col % 64 / 8) ^ (row % 8)) * 16 + (col % 8) * 2. For each
  // store the warp's rows g = 0..7 XOR the 16-B chunk, so its 32 lanes hit 32 different banks. st.shared on the 32-bit
  // address: through the generic pointer the 128 x 128 and 128 x 160 d128 builds stored with 64 ST.E (generic, 64-bit
  // addresses), the default 128 x 176 with STS.
  __device__ __forceinline__ void write_o_smem(uint8_t* rows, const float (&o)[kORegs],
                                               const float (&inv_sum)[2]) const {
    static_assert(kPanelRowBytes == 128, "st_shared_rows_sw128 writes 128-B rows");
    st_shared_rows_sw128(smem_addr(rows), Cfg::kQPanelBytes, tid, o, inv_sum,
                         [](float lo, float hi) { return pack(lo, hi); });
  }

  // The TMA-store epilogue: O into shared memory (`rows`: this warpgroup's rows of the tile's Q stage), a proxy fence
  // so TMA sees the writes, a barrier over this warpgroup, then the leader issues one 64 x 64 box per panel and commits
  // them as one bulk group. Nobody waits here: the stores overlap the next tile, and the caller hands the stage back
  // only after tma_store_wait_read. TMA clips the rows past seqlen_q. lse stays a plain store.
  __device__ __forceinline__ void store_tma(const CUtensorMap* tma_o, uint8_t* rows, const FwdParams& p,
                                            const SeqRange& r, const Tile& t, const float (&o)[kORegs],
                                            const float (&inv_sum)[2], const float (&lse)[2]) const {
    write_o_smem(rows, o, inv_sum);
    fence_proxy_async_smem();
    NamedBarrier::sync(NamedBarrier::kFirstId + Cfg::kConsumers + wg, 128);
    if (leader) {
      const int row = r.q_start + t.m_block * Cfg::kBlockM + wg * 64;
#pragma unroll
      for (int panel = 0; panel < Cfg::kPanelsV; ++panel)
        tma_store_4d(tma_o, rows + panel * Cfg::kQPanelBytes, panel * kPanelCols, row, t.head, r.batch_coord);
      tma_store_commit();
    }
    store_lse(p, r, t, lse);
  }

  // A tile whose rows attend no key (causal with seqlen_q > seqlen_k, or an empty varlen sequence): zeros, and lse
  // -inf, or the head's sink (natural log) with sinks.
  __device__ __forceinline__ void store_empty(const FwdParams& p, const SeqRange& r, const Tile& t) const {
    float zeros[kORegs];
#pragma unroll
    for (int i = 0; i < kORegs; ++i) zeros[i] = 0.f;
    const float empty_lse = p.sinks != nullptr ? p.sinks[t.head] : -INFINITY;
    const float none[2] = {0.f, 0.f}, lse[2] = {empty_lse, empty_lse};
    store(p, r, t, zeros, none, lse);
  }
};

// One tile of the persistent walk that has key blocks to visit.
struct WorkTile {
  int index;  // scheduler tile index
  Tile t;
  SeqRange r;
  int n_blocks;
  int n_first;  // the first key block it visits (0 but under a window; key_block_range)
  int q_stage;  // the Q stage holding its rows (and, with the TMA-store epilogue, its O afterwards)
  float sink;  // its head's sink (OnlineSoftmax::finalize), -inf without sinks; loaded with the tile, used at its end
};

template <class Cfg>
__device__ __forceinline__ void consumer_loop(const CUtensorMap* tma_o, const FwdParams& p, uint8_t* smem,
                                              typename Cfg::Barriers& bars, int wg) {
  using C = Consumer<Cfg>;
  C c{wg, static_cast<int>(threadIdx.x % 128), threadIdx.x % 128 == 0};
  // With the TMA-store epilogue a tile's Q stage is released after its O has been stored from it, not after the
  // tile's last Q K^T. Never under the dynamic deal (varlen calls store O directly anyway, store_o_direct): its
  // consumers wait for the next published tile before the previous tile's epilogue, which would then still hold the
  // stage the producer needs to publish in.
  const bool store_via_q_stage = Cfg::kTmaStoreO && !Cfg::kDynamic && p.store_o_tma != 0;
  int stored_q_stage = -1;  // Q stage whose O store is in flight, handed back by release_stored_q()
  if (store_via_q_stage && c.leader) tma_prefetch_descriptor(tma_o);
  StaticPersistentScheduler<Cfg::kCausal> sched(p.deal);
  PipelineState<Cfg::kStages> k_state, v_state;
  PipelineState<Cfg::kQStages> q_state;

  // Descriptors of stage 0 (and of this warpgroup's 64 rows inside each Q panel); stage s is k*Bytes * s further.
  const uint32_t smem_base = smem_addr(smem);
  const uint64_t desc_q0 = make_desc_kmajor_sw128(smem_base + wg * 64 * kPanelRowBytes);
  const uint64_t desc_k0 = make_desc_kmajor_sw128(smem_base + Cfg::kOffK);
  const uint64_t desc_v0 = make_desc_mnmajor_sw128(smem_base + Cfg::kOffV, Cfg::kKVPanelBytes);

  if constexpr (Cfg::kPingpong) {
    if (wg == Cfg::kConsumers - 1) NamedBarrier::arrive(NamedBarrier::kFirstId + 0, C::kSchedThreads);  // 0 first
  }

  float s[C::kSRegs];
  float o[C::kORegs];
  uint32_t pa[C::kKSteps][4];
  float o_scale[2];
  OnlineSoftmax<Cfg::kBlockN, Cfg::kIntMax> softmax;

  auto issue_qk = [&]() {
    warpgroup_arrive();
    gemm_ss<Cfg::kBlockN, Cfg::kHeadDim, Cfg::kBF16, Cfg::kQPanelBytes, Cfg::kKVPanelBytes>(
        s, desc_advance(desc_q0, q_state.index * Cfg::kQBytes), desc_advance(desc_k0, k_state.index * Cfg::kKBytes));
    wgmma_commit();
  };
  auto issue_pv = [&]() {
    warpgroup_arrive();
    gemm_rs<Cfg::kBlockN, Cfg::kHeadDimV, Cfg::kBF16>(o, pa, desc_advance(desc_v0, v_state.index * Cfg::kVBytes));
    wgmma_commit();
  };
  // K block done; after a tile's last Q K^T its Q stage is free too.
  auto release_k = [&](bool last_of_tile) {
    if (c.leader) {
      bars.k.consumer_release(k_state);
      if (last_of_tile && !store_via_q_stage) bars.q.consumer_release(q_state);
    }
    k_state.advance();
    if (last_of_tile) q_state.advance();
  };
  // Give the previous tile's Q stage back once its O stores have read it. Called one step after the epilogue, so the
  // wait is normally already satisfied, and before waiting on the next Q (whose load may need this very stage).
  auto release_stored_q = [&]() {
    if constexpr (Cfg::kTmaStoreO) {
      if (stored_q_stage >= 0) {
        if (c.leader) {
          tma_store_wait_read<0>();
          bars.q.empty[stored_q_stage].arrive();
        }
        stored_q_stage = -1;
      }
    }
  };
  auto release_v = [&]() {
    if (c.leader) bars.v.consumer_release(v_state);
    v_state.advance();
  };
  // n_block counts from the tile's first key block (WorkTile::n_first).
  auto softmax_block = [&](const WorkTile& w, int n_block) {
    if constexpr (Cfg::kLocal) n_block += w.n_first;
    if constexpr (Cfg::kSoftcap) softcap_scores<tanh_poly_pays(Cfg::kHeadDim)>(s, p.softcap_pre);
    if (block_needs_mask<Cfg>(p, w.r, w.t.m_block, n_block)) c.apply_mask(s, p, w.r, w.t.m_block, n_block);
    softmax.step(s, p.scale_log2, p.rescale_log2, o_scale);
  };
  auto zero_o = [&]() {
#pragma unroll
    for (int i = 0; i < C::kORegs; ++i) o[i] = 0.f;
  };
  auto epilogue = [&](const WorkTile& w, const float (&inv_sum)[2], const float (&lse)[2]) {
    if (store_via_q_stage) {
      c.store_tma(tma_o, smem + w.q_stage * Cfg::kQBytes + wg * 64 * kPanelRowBytes, p, w.r, w.t, o, inv_sum, lse);
      stored_q_stage = w.q_stage;
    } else {
      c.store(p, w.r, w.t, o, inv_sum, lse);
    }
  };
  auto finish_tile = [&](const WorkTile& w) {
    float inv_sum[2], lse[2];
    softmax.finalize(p.scale_log2, w.sink, inv_sum, lse);
    epilogue(w, inv_sum, lse);
  };
  // The tile at scheduler index `tile` into w: 1 if it has key blocks; 0 if its rows attend none (written here: zeros
  // and lse -inf); -1 if it has no rows (a varlen sequence shorter than the longest).
  auto take_tile = [&](int tile, WorkTile& w) -> int {
    w.index = tile;
    w.t = sched.decode(tile);
    w.r = seq_range(p, w.t.batch);
    if (w.t.m_block * Cfg::kBlockM >= w.r.seqlen_q) return -1;
    const KeyBlocks blocks = key_block_range<Cfg>(p, w.r, w.t.m_block);
    w.n_blocks = blocks.count;
    w.n_first = blocks.first;
    w.q_stage = q_state.index;  // q_state has advanced past every earlier tile
    if (w.n_blocks > 0) {
      w.sink = p.sinks != nullptr ? p.sinks[w.t.head] : -INFINITY;
      return 1;
    }
    c.store_empty(p, w.r, w.t);
    return 0;
  };
  // Next tile that has key blocks: from scheduler index `from` on (static deal), or the producer's next published
  // tile (dynamic deal; it publishes tiles with rows only, those without key blocks without a Q load).
  auto find_work = [&](int from, WorkTile& w) -> bool {
    if constexpr (Cfg::kDynamic) {
      while (true) {
        bars.q.consumer_wait(q_state);
        const int tile = static_cast<int>(ld_shared_b32(smem_addr(&bars.tile[q_state.index])));
        if (tile < 0) return false;
        if (take_tile(tile, w) > 0) return true;
        if (c.leader) bars.q.consumer_release(q_state);
        q_state.advance();
      }
    } else {
      for (int tile = from; sched.valid(tile); tile = sched.next(tile)) {
        if (take_tile(tile, w) > 0) return true;
      }
      return false;
    }
  };
  // The steady-state step (FA3 Algorithm 2): S for block n_block while P V of the previous block runs. O is
  // rescaled by the previous softmax's factors (o_scale) right before the P V that adds to it, between the two
  // issues, so the multiplies run while the tensor cores compute Q K^T rather than after the P V wait.
  auto overlapped_step = [&](const WorkTile& w, int n_block) {
    bars.k.consumer_wait(k_state);
    bars.v.consumer_wait(v_state);
    c.gemm_turn_begin();
    issue_qk();  // S_next = Q K_n^T
    fence_operands(o);  // keeps the compiler from hoisting the multiplies above the Q K^T issue
    C::rescale(o, o_scale);
    issue_pv();  // O += P V_{n+1}
    c.gemm_turn_end();
    fence_operands(o);
    wgmma_wait<1>();  // S_next is ready; P V may still be running
    fence_operands(s);
    release_k(n_block == 0);
    release_stored_q();
    softmax_block(w, n_block);
    // ptxas hoists this plain P V wait above the softmax before it (SASS: all exp2 after the wait), so the
    // softmax does not overlap this warpgroup's P V, only the other warpgroup's GEMMs. Making the wait depend on the
    // softmax (wgmma_wait_after, as the FP8 kernel does) was measured on the H200 (2026-12-01, two runs, same-run
    // against this build): 4-10% slower at seqlen 512-2048 with 128 x 128 tiles (d128 512 0.136 vs 0.127 ms, d64
    // causal 1024 -10%), 1-2% slower at 16384; it also made ptxas spill in the d64 and long causal builds.
    wgmma_wait<0>();
    fence_operands(o);
    release_v();
    C::to_a_fragments(s, pa);
  };
  // First Q K^T of a tile, alone (no P V to overlap with).
  auto first_block = [&](const WorkTile& w) {
    bars.q.consumer_wait(q_state);
    bars.k.consumer_wait(k_state);
    c.gemm_turn_begin();
    issue_qk();
    c.gemm_turn_end();
    wgmma_wait<0>();
    fence_operands(s);
    release_k(w.n_blocks == 1);
    softmax_block(w, w.n_blocks - 1);
    o_scale[0] = o_scale[1] = 1.f;  // O is still zero: the next step's rescale is skipped
    C::to_a_fragments(s, pa);
  };
  // Last P V of a tile, alone (O rescaled first: no Q K^T to hide that under).
  auto last_block = [&]() {
    C::rescale(o, o_scale);
    bars.v.consumer_wait(v_state);
    c.gemm_turn_begin();
    issue_pv();
    c.gemm_turn_end();
    wgmma_wait<0>();
    fence_operands(o);
    release_v();
  };

  WorkTile cur;
  if constexpr (Cfg::kCrossTile) {
    if (!find_work(sched.first(), cur)) return;
    softmax.reset();
    zero_o();
    first_block(cur);
    int n_block = cur.n_blocks - 1;  // the block whose P is in pa
    while (true) {
      if (n_block > 0) {
        overlapped_step(cur, --n_block);
        continue;
      }
      const WorkTile prev = cur;
      if (!find_work(sched.next(prev.index), cur)) {
        last_block();
        finish_tile(prev);
        if constexpr (Cfg::kTmaStoreO) {
          if (c.leader && store_via_q_stage) tma_store_wait<0>();  // the last stores finish before the CTA exits
        }
        break;
      }
      // Tile boundary: the new tile's first Q K^T runs with the previous tile's last P V.
      release_stored_q();
      bars.q.consumer_wait(q_state);
      bars.k.consumer_wait(k_state);
      bars.v.consumer_wait(v_state);
      c.gemm_turn_begin();
      issue_qk();
      fence_operands(o);
      C::rescale(o, o_scale);
      issue_pv();
      c.gemm_turn_end();
      fence_operands(o);
      wgmma_wait<1>();
      fence_operands(s);
      release_k(cur.n_blocks == 1);
      float inv_sum[2], lse[2];
      softmax.finalize(p.scale_log2, prev.sink, inv_sum, lse);  // the previous tile's row statistics
      softmax.reset();
      n_block = cur.n_blocks - 1;
      softmax_block(cur, n_block);
      o_scale[0] = o_scale[1] = 1.f;  // the new tile's O starts at zero (zero_o below)
      wgmma_wait<0>();
      fence_operands(o);
      release_v();
      epilogue(prev, inv_sum, lse);
      // A one-block tile has no later step before the next boundary, whose Q load may need the stage just stored
      // from: hand it back now rather than one tile late.
      if (cur.n_blocks == 1) release_stored_q();
      zero_o();
      C::to_a_fragments(s, pa);
    }
  } else {
    for (int from = sched.first(); find_work(from, cur); from = sched.next(cur.index)) {
      softmax.reset();
      zero_o();
      if constexpr (Cfg::kOverlap) {
        first_block(cur);
        for (int n_block = cur.n_blocks - 2; n_block >= 0; --n_block) overlapped_step(cur, n_block);
        last_block();
      } else {
        bars.q.consumer_wait(q_state);
        for (int n_block = cur.n_blocks - 1; n_block >= 0; --n_block) {
          bars.k.consumer_wait(k_state);
          c.gemm_turn_begin();
          issue_qk();
          c.gemm_turn_end();
          wgmma_wait<0>();
          fence_operands(s);
          release_k(n_block == 0);
          softmax_block(cur, n_block);
          C::to_a_fragments(s, pa);
          last_block();  // rescales O, then P V
        }
      }
      finish_tile(cur);
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_fwd_kernel(const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
                     const __grid_constant__ CUtensorMap tma_v, const __grid_constant__ CUtensorMap tma_o,
                     const FwdParams params) {
  uint8_t* smem = aligned_dynamic_smem();
  auto& bars = *reinterpret_cast<typename Cfg::Barriers*>(smem + Cfg::kOffBarriers);
  warp_specialize<Cfg>(
      bars,
      [&] {
        if (threadIdx.x / 32 == 0 && elect_one()) producer_loop<Cfg>(&tma_q, &tma_k, &tma_v, params, smem, bars);
      },
      [&](int consumer) { consumer_loop<Cfg>(&tma_o, params, smem, bars, consumer); });
}

}  // namespace fa3nn::hopper
