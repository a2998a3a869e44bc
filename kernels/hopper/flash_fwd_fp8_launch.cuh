// Host-side launch of the Hopper FP8 forward: e4m3 tensor maps, the tile table per head dim, and the dispatch from
// a call to a compiled instantiation. Included by one translation unit per head dim (flash_fwd_fp8_d*.cu);
// flash_fwd_fp8_api.cu holds the C ABI. Shares fail(), the driver entry point and the SM/L2 queries with the bf16
// launcher (flash_fwd_launch.cuh).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "flash_fwd_fp8.cuh"
#include "flash_fwd_launch.cuh"

namespace fa3nn::hopper::host {

struct Fp8Problem {
  const void *q8, *k8, *vt8;
  void* out;
  float* lse;
  const int *cu_seqlens_q, *cu_seqlens_k;
  const int* vt_starts;  // varlen: (batch + 1) first vt8 column per sequence, multiples of 16 (Fp8FwdParams)
  const float *q_descale, *k_descale, *v_descale;
  int batch, seqlen_q, seqlen_k, seqlen_k_pad, max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim;
  // Element (= byte for e4m3) strides: q8, k8 (batch, row, head); vt8 (batch, head, headdim row); out (batch, row,
  // head). Varlen: the batch entries are unused.
  const int64_t* strides;
  const int64_t* descale_strides;  // q, k, v descales: (batch, head) each
  int block_q, block_k;
  float softmax_scale;
  bool out_bf16, causal;
  cudaStream_t stream;
  bool one_cta_per_tile = false;  // variant 5: grid = tiles; else one CTA per SM looping over tiles (the default)
  int causal_deal = 1;            // as Problem::causal_deal (flash_fwd_launch.cuh): variant 19 sets 0
  int max_ctas = 0;               // as Problem::max_ctas (persistent_grid)
  int* tile_counter = nullptr;    // as Problem::tile_counter: varlen calls' dynamic deal (Fp8FwdConfig::kDynamic)
};

template <class Cfg>
int launch_fp8_dealt(const Fp8Problem& pr) {
  if (pr.block_k % Cfg::kBlockN != 0 && pr.block_k < pr.max_seqlen_k)
    return fail("%s", Cfg::kBlockN == 128   ? "block_k must be a multiple of 128 (the kernel's key block) or >= max_seqlen_k"
                      : Cfg::kBlockN == 192 ? "block_k must be a multiple of 192 (this variant's key block) or >= max_seqlen_k"
                                            : "block_k must be a multiple of 256 (this variant's key block) or >= max_seqlen_k");
  const bool varlen = pr.cu_seqlens_q != nullptr;
  const int64_t map_batch = varlen ? 1 : pr.batch;
  const int64_t* st = pr.strides;
  const CUtensorMapSwizzle qk_swizzle = Cfg::kRowBytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  // e4m3: element strides are byte strides; box[0] bytes must equal the swizzle span.
  constexpr CUtensorMapDataType e4m3 = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  CUtensorMap tq, tk, tv;
  const bool ok =
      encode_map(&tq, e4m3, pr.q8, {pr.headdim, pr.seqlen_q, pr.nheads, map_batch},
                 {st[1], st[2], map_batch_stride(varlen, st[0], pr.seqlen_q, st[1])},
                 {Cfg::kRowBytes, Cfg::kBlockM, 1, 1}, qk_swizzle) &&
      encode_map(&tk, e4m3, pr.k8, {pr.headdim, pr.seqlen_k, pr.nheads_kv, map_batch},
                 {st[4], st[5], map_batch_stride(varlen, st[3], pr.seqlen_k, st[4])},
                 {Cfg::kRowBytes, Cfg::kBlockN, 1, 1}, qk_swizzle) &&
      encode_map(&tv, e4m3, pr.vt8, {pr.seqlen_k_pad, pr.headdim, pr.nheads_kv, map_batch},
                 {st[8], st[7], map_batch_stride(varlen, st[6], pr.nheads_kv, st[7])},
                 {Cfg::kVPanelKeys, Cfg::kHeadDim, 1, 1}, Cfg::kVPanelKeys == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
  if (!ok)
    return fail("%s", "cuTensorMapEncodeTiled failed for the FP8 forward (pointers must be 16-B aligned, q8/k8 row "
                      "and head strides and vt8's padded key length multiples of 16 bytes)");

  Fp8FwdParams fp{};
  fp.base = fill_fwd_params<Cfg>(pr, 1);  // K and Vt: one byte per element
  fp.q_descale = pr.q_descale;
  fp.k_descale = pr.k_descale;
  fp.v_descale = pr.v_descale;
  const int64_t* ds = pr.descale_strides;
  fp.q_descale_batch_stride = ds[0];
  fp.q_descale_head_stride = ds[1];
  fp.k_descale_batch_stride = ds[2];
  fp.k_descale_head_stride = ds[3];
  fp.v_descale_batch_stride = ds[4];
  fp.v_descale_head_stride = ds[5];
  fp.block_q = pr.block_q;
  fp.block_q_div = FastDiv(pr.block_q);
  fp.tiles_per_block = pr.block_k % Cfg::kBlockN == 0 ? 1.f / static_cast<float>(pr.block_k / Cfg::kBlockN) : 0.f;
  fp.vt_starts = varlen ? pr.vt_starts : nullptr;

  const long long tiles = static_cast<long long>(fp.base.num_m_blocks) * pr.nheads * pr.batch;
  if (tiles == 0) return 0;
  if (tiles > 0x7fffffffLL) return fail("%s", "too many tiles for one launch");
  // Persistent: one CTA per SM, each walking tiles in the scheduler's order. H200, 2026-11-30 16:48 UTC
  // (scripts/bench_hopper_fp8.py, kernel only): +1-11% over one CTA per tile at d128/d256 x 2048-16384 x causal or
  // not, every shape faster (d128 16k causal 546 -> 621 TFLOP/s, d256 16k 863 -> 961). Variant 5 keeps one CTA per tile.
  static const int sms = num_sms();
  const int grid = pr.one_cta_per_tile ? static_cast<int>(tiles) : persistent_grid(tiles, sms, pr.max_ctas);
  fp.base.deal = TileDeal::make(fp.base.num_m_blocks, pr.nheads, pr.batch, fp.base.heads_per_section,
                                fp.base.boustrophedon, grid);
  if constexpr (Cfg::kDynamic) {
    fp.base.tile_counter = pr.tile_counter;
    fp.base.num_tiles = static_cast<int>(tiles);
    const cudaError_t err = cudaMemsetAsync(pr.tile_counter, 0, sizeof(int), pr.stream);
    if (err != cudaSuccess) return fail("zeroing the tile counter: %s", cudaGetErrorString(err));
  }
  if constexpr (Cfg::kTmaStoreO) {
    // O: one 64-row box per consumer warpgroup and 64-column panel; varlen, or an output TMA cannot address, keeps
    // the direct stores.
    CUtensorMap to{};
    fp.base.store_o_tma = !varlen && make_map(&to, pr.out, pr.out_bf16, pr.headdim, pr.seqlen_q, pr.nheads,
                                              pr.batch, st[10], st[11], st[9], 64)
                              ? 1
                              : 0;
    auto kernel = flash_fwd_fp8_tma_store_kernel<Cfg>;
    if (const int status = configure_smem<Cfg>(kernel)) return status;
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, pr.stream>>>(tq, tk, tv, to, fp);
  } else {
    auto kernel = flash_fwd_fp8_kernel<Cfg>;
    if (const int status = configure_smem<Cfg>(kernel)) return status;
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, pr.stream>>>(tq, tk, tv, fp);
  }
  return check_launch("kernel launch: %s");
}

// Varlen calls given a tile counter (Fp8Problem::tile_counter) take the dynamic deal where kDeals (the cross-tile
// default: run_fp8_tiles), the rest the static one; the caller decides (fa3nn/backends/hopper.py varlen_deal_for).
template <class Cfg, bool kDeals = false>
int launch_fp8(const Fp8Problem& pr) {
  if constexpr (kDeals) {
    if (pr.tile_counter != nullptr && pr.cu_seqlens_q != nullptr) return launch_fp8_dealt<typename Cfg::Dynamic>(pr);
  }
  return launch_fp8_dealt<Cfg>(pr);
}

// K/V stages and Q stages per head dim (key blocks of 128, or 192 at head dim 128: run_fp8_headdim). An FP8 key
// block costs half the tensor-core time of a bf16 one while its TMA latency stays, so d64/d128 take a third K/V stage
// where the bf16 kernel keeps two; d256 has room for two (Q 2 x 32 KB + K, Vt 2 x 2 x 32 KB = 192 KB).
// kPolyExpEvery: every kPolyExpEvery-th score's exp2 on the FP32 pipe (exp2_poly), the rest on MUFU; 0 = all on MUFU;
// negative: every -kPolyExpEvery-th P fragment register by the linear exp2 (e4m3_exp2.cuh; variants 48-50).
// All on MUFU everywhere except the d128 192-key fused-turn default, which takes a quarter on the FP32 pipe: in two
// runs (fp8poly-h200-20261202-0259, fp8halves-h200-20261202-0307) +2-5% and +5-9% non-causal from 2k keys, +0-2%
// causal (-7% at 1k causal, where 128-key blocks serve by default). Before that, on the overlapped kernels: a
// quarter on the FP32 pipe at d128 won +0.4-18% in one run (16:48 UTC 2026-11-30), lost at 16k in the next (19:37
// UTC: 588 vs 669 TFLOP/s non-causal, 611 vs 647 causal) and won there again in the one after (20:10 UTC: 680 vs
// 635, 636 vs 582; all-MUFU won at 4k, 664 vs 639): the same kernel spreads ~8% from run to run, more than the
// difference. ncu (19:40 UTC) said that d128 loop was latency/issue-bound, not MUFU-bound (issue slots 52% busy,
// tensor pipe 35%), and each polynomial exp2 costs ~10 issued instructions to save one MUFU.
//   variant 0: the default below.  1: without pingpong.  2: the other stage count (d128: 2, d256: Q 1 + 3 K/V).
//   3 (d128): a quarter of the exp2s as the FP32 polynomial.  5: one CTA per tile instead of per SM.
//   6, 7, 9 (d128, Fp8Experiment): without the softmax (wrong output, timing only); the P V wait ptxas may hoist;
//   K/V never loaded (wrong output, timing only). 10 (d128): key blocks of 192 (block_k a multiple of 192 or one
//   descale per sequence); 11: variant 10 without the softmax (timing only); 12: as 22 (the name key_block_128);
//   13: variant 10 with a quarter of the exp2s as the FP32 polynomial (measured 4-12% slower than variant 10).
//   14: variant 10 without pingpong. 15, 16: variant 10 without its exp2s / its row max tree (WRONG output, timing
//   only: what MUFU and the max chain cost in the 192-key loop). 17: variant 10 without K/V loads; 18: without the
//   softmax and the K/V loads (WRONG outputs, timing only: what L2 -> shared-memory traffic costs the loop).
//   19: the default with the causal deal before 2026-12-01 (L2-sized sections, round-robin; Fp8Problem::causal_deal).
//   20: 128-key blocks without kPromote, overlapped (one tensor-core accumulator across all key blocks: loses the
//   mean of V over long key ranges; the default of every head dim before 2026-12-01's eighth session, kept to time
//   what the promotion costs; so are variants 1-3, 6, 7, 9-11, 13-18). 21 (d128): 192-key blocks, promoted, serial
//   steps (the block accumulator shares S's registers; the d128 default for 192-key tiles on 2026-12-01); 22: the
//   same on 128-key blocks (the default at d256; d256: P V in two head-dim halves, Fp8FwdConfig::kPvSplit).
//   24 (d64, d128): variant 22 with one pingpong turn per block (kFusedTurn: P V of the previous block, its
//   promotion and this block's Q K^T in one turn; d128's default where 128-key blocks are chosen).
//   25 (d128): variant 24 on 192-key blocks; 28 / 29: variant 25 with every 4th / 8th exp2 as the FP32 polynomial
//   (28: d128's default where 192-key blocks are chosen). 30 / 31 (d128): variant 25 / 28 on 256-key blocks (block_k
//   a multiple of 256 or one descale per sequence; Vt in two 128-key SW128 panels, S = m64n256, the K stage wait
//   inside the turn: Fp8FwdConfig::kKWaitInTurn); 32 / 33: every 8th / 16th exp2 as the FP32 polynomial; 34: variant
//   30 with Q K^T in two key halves, the first half's row max under the second's GEMM (kFusedTurnSplitS; d128's
//   default on 256-key blocks until 2026-12-03, when 37 replaced it). 35 (d128): variant 24 with three consumer warpgroups (160 registers each, the K
//   stage wait inside the turn and the tile decoded again after the key loop: 0 spills). 36 (d128): variant 30
//   without its row max tree (kFusedTurnCutRowMax: WRONG output, timing only; what the tree's instructions cost the
//   256-key loop: +12..+16% without them, s18e; a max the exp2s need not wait for did not recover it, s18f).
//   37 / 38 (d128): variant 34 / 35 with the row max from 3-input integer maxes (kFusedTurnSplitSIntMax /
//   kFusedTurnIntMax; bitwise the same output; 37: d128's default on 256-key blocks until 2026-12-03's
//   twenty-first session, when 45 replaced it). 39 (every head dim) / 40
//   (d64): variant 24 / 27 with it. 41 (d128): variant 30 (one n256 Q K^T) with it. 43 (d128): variant 37 with
//   softmax turns (kFusedTurnSoftmaxTurns, a diagnostic: one warpgroup's softmax at a time; s20a: no faster). 42 / 44
//   (P V as two head-dim commit groups, the first half's promotion under the second GEMM; without / with the turns)
//   lost 0..4% (s20a) and were removed. 45 (d128; the default's kernel on 256-key blocks): variant 37 with P's row
//   sums from the P V GEMM (kFusedTurnMmaRowSum:
//   8 rows of ones under every Vt panel, P V as m64n136k32; the sum of the e4m3 P8, so not bitwise 37's output) on
//   two K/V stages (Fp8Tiles<128, 2>: with three and two Q stages the ones make 231 KB > 227; with three and one Q
//   stage ptxas spilled 312-404 B, 37 as well); 46: variant 37 on the same stages. (47, the same sums from m64n8k32
//   GEMMs over one tile of ones on three stages: 0-5% under 45 in every row of s21c, removed.) 48 / 49 / 50 (d128):
//   45 with a quarter / half / all of its P8 from the linear exp2 (e4m3_exp2.cuh: no MUFU, less exact; kPolyExpEvery
//   -4 / -2 / -1). 53: the default kernels with fast_exp2 (run_fp8_default; both output dtypes). 54 (d128): 45 with
//   its fused turns chained across tiles (kFusedTurnMmaRowSumCrossTile; bitwise 45's output; d128's default kernel
//   on 256-key blocks in 2026-12-03's twenty-fourth session, 45 the one before; it stores O directly, 64 4-byte
//   stores per thread, where the default since 2026-12-04 stores it through shared memory by TMA).
//   27 (d64): variant 24 with three consumer warpgroups (192-row query tiles, 160 registers each, as the bf16 d64
//   kernel; the d64 default). 24 at d256: the fused turn with P V in two head-dim halves (the K stage wait inside the
//   turn, kKWaitInTurn; it spilled without).
//   The one-pair deal measured +6% at d128 causal 4096, +11% / +5% at d256 causal 2048 / 4096, within 1% at d128
//   causal 2048 (onepair-h200-20261201-1459).
// kPolyExpEvery of the 256-key default kernel under fast_exp2: the linear exp2 on every second P fragment register.
constexpr int kFastExp2Every = -2;

template <int D, int kVariant> struct Fp8Tiles;
template <> struct Fp8Tiles<64, 0> { static constexpr int kStages = 3, kQStages = 2, kPolyExpEvery = 0; };
template <> struct Fp8Tiles<128, 0> { static constexpr int kStages = 3, kQStages = 2, kPolyExpEvery = 0; };
template <> struct Fp8Tiles<128, 2> { static constexpr int kStages = 2, kQStages = 2, kPolyExpEvery = 0; };
template <> struct Fp8Tiles<256, 0> { static constexpr int kStages = 2, kQStages = 2, kPolyExpEvery = 0; };
template <> struct Fp8Tiles<256, 2> { static constexpr int kStages = 3, kQStages = 1, kPolyExpEvery = 0; };

// kPromote (per-block fp32 promotion of P V, serial steps or the fused turn, flash_fwd_fp8.cuh): every default
// kernel (run_fp8_default) and variants 12, 21, 22, 24, 25, 27-29; the other variants accumulate across blocks on the
// tensor cores in the overlapped loop, as every FP8 kernel did before 2026-12-01's seventh session (they lose the
// mean of V over long key ranges: benchmarks only). W: consumer warpgroups (Fp8FwdConfig::kConsumers).
template <int D, int kVariant, bool kPingpong = true, int kPolyExpEvery = Fp8Tiles<D, kVariant>::kPolyExpEvery,
          int kExperiment = kNoExperiment, int N = 128, bool kPromote = false, int W = 2>
int run_fp8_tiles(const Fp8Problem& pr) {
  using T = Fp8Tiles<D, kVariant>;
  constexpr int S = T::kStages, Q = T::kQStages, P = kPolyExpEvery, X = kExperiment;
  // run_fp8_default's kernels (the fused turn at every head dim, d64's with three consumers): the only ones built for
  // fp16 output too; of them the cross-tile chain (d128, 256-key blocks) also deals varlen calls dynamically
  // (launch_fp8's kDeals; Fp8FwdConfig::kDynamic says why only that one)
  constexpr int kDefaultPoly = N == 192 ? 4 : T::kPolyExpEvery;  // the 192-key default: a quarter of exp2s on FP32
  // the 256-key default with fast_exp2 (run_fp8_default): half its P8 from the linear exp2
  constexpr int kFastPoly = N == 256 ? kFastExp2Every : kDefaultPoly;
  constexpr int kDefaultSchedule = N == 256 ? kFusedTurnMmaRowSumCrossTileTmaStore : kFusedTurn;
  constexpr int kDefaultTiles = N == 256 ? 2 : 0;  // the 256-key default's rows of ones leave room for two stages
  constexpr bool kDefaultKernel = kPromote && X == kDefaultSchedule && (N == 128 || (D == 128 && N >= 192)) &&
                                  W == (D == 64 ? 3 : 2) && kVariant == kDefaultTiles && kPingpong &&
                                  (P == kDefaultPoly || P == kFastPoly);
  constexpr bool kDeals = kDefaultKernel && Fp8FwdConfig<D, S, Q, true, false, true, P, X, N, kPromote, W>::kCrossTile;
  if (pr.out_bf16)
    return pr.causal ? launch_fp8<Fp8FwdConfig<D, S, Q, true, true, kPingpong, P, X, N, kPromote, W>, kDeals>(pr)
                     : launch_fp8<Fp8FwdConfig<D, S, Q, true, false, kPingpong, P, X, N, kPromote, W>, kDeals>(pr);
  if constexpr (!kDefaultKernel) {
    return fail("%s", "FP8 benchmark variants exist for bf16 output only");
  } else {
    return pr.causal ? launch_fp8<Fp8FwdConfig<D, S, Q, false, true, true, P, X, N, kPromote, W>, kDeals>(pr)
                     : launch_fp8<Fp8FwdConfig<D, S, Q, false, false, true, P, X, N, kPromote, W>, kDeals>(pr);
  }
}

// The default kernel per head dim: promoted (flash_fwd_fp8.cuh, kPromote) with one pingpong turn per key block
// (kFusedTurn; d64 with three consumer warpgroups, d256 with P V in two head-dim halves: +17-22% non-causal and +13-23%
// causal over its serial steps at 1k-16k keys, 1056-1101 TFLOP/s non-causal from 4k, fused256-h200-20261202-0823). Head
// dim 128 beyond 256 keys (or where 128-key blocks don't fit) takes 256-key blocks (every exp2 on MUFU; Q K^T in two
// key halves, kFusedTurnSplitS: +0.2..+6% causal, -2..+2% non-causal at 512-16k keys against one n256 GEMM,
// splits-h200-20261202-0852; each row's max from 3-input integer maxes, kFusedTurnSplitSIntMax: +2..+8% non-causal,
// +3..+6% causal at 2k-16k against the float tree, same run, s19b-h200-20261203-0821; at d64 with three consumers it
// lost 0..9%, at d256 -4..+3%, so those keep the float tree; P's row sums from the P V GEMM over 8 rows of ones,
// kFusedTurnMmaRowSum on two K/V stages: +3..+10% non-causal at 1k-16k, -2.8..+3.4% causal against that kernel on
// three, one process, s21d-h200-20261203-1407, and the mean of V 4x closer; its turns chained across tile ends,
// kFusedTurnMmaRowSumCrossTile: causal +3..+9% at 1k-4k and +1..+5% beyond, non-causal -2..+4%, against that kernel
// interleaved, s24c-h200-20261203-2131; O stored through shared memory by TMA in dense calls,
// kFusedTurnMmaRowSumCrossTileTmaStore: the direct stores took ~2000 clocks inside the turn at each tile end (fp8_trace,
// s25f), the TMA store +11 / +7 / +5.5 / +2% causal and +10 / +6 / +5% non-causal at 1k / 2k / 4k / 8k against them,
// interleaved, s25g-h200-20261204-0110) where the descale tiles fit them, else
// 192-key blocks (every 4th exp2 as the FP32 polynomial, kPolyExpEvery above), else 128-key ones. On the H200, kernel
// only, TFLOP/s non-causal / causal, fused 256-key against fused 192-key poly4: 827 / 629 against 768 / 605 at 2k, 848
// / 736 against 783 / 694 at 4k, 844 / 800 against 807 / 758 at 16k; at 1k against the fused 128-key kernel 721 / 463
// against 618 / 466 (kb256-h200-20261202-0758), at 512 590 / 318 against 507 / 325 (allgpu-h200-20261202-0841). Before
// that (192-key blocks from 1025 keys, before the polynomial), fused 192-key against fused 128-key at 1k / 4k / 8k /
// 16k: 591 / 784 / 785 / 804 against 613 / 731 / 729 / 694; causal 426 / 718 / 788 / 810 against 464 / 693 / 735 / 744
// (2k: 731 vs 698 non-causal, 593 vs 598 causal; fused192-h200-20261202-0220); the fused 128-key kernel had run +10-13%
// / +11-21% over the serial one (fusedturn-h200-20261202-0158). d64 fused against serial: 388 / 430 / 444 against 352 /
// 389 / 384 non-causal at 1k / 4k / 16k, 295 / 407 / 449 against 276 / 371 / 398 causal (fused192-h200-20261202-0220);
// with three consumers 456 / 551 / 590 against two's 391 / 435 / 427 non-causal, 288 / 471 / 545 against 296 / 405 /
// 434 causal (fp8d64w3-h200-20261202-0238; +12-38% except causal 1k, -3%). fa3nn/fp8/key_blocks.py mirrors the choice.
inline bool fits_key_block(const Fp8Problem& pr, int block) {
  return pr.block_k % block == 0 || pr.block_k >= pr.max_seqlen_k;
}

// fast_exp2 (variant 53, the recipes' fast_exp2): the 256-key kernel with half its P8 from the linear exp2
// (e4m3_exp2.cuh; +11..+15% non-causal and +8..+12% causal at 2k-16k keys, s23c / s23d); every other default kernel keeps
// MUFU's exp2 (fa3nn/fp8/key_blocks.py FAST_EXP2_EVERY mirrors this).
template <int D>
int run_fp8_default(const Fp8Problem& pr, bool fast_exp2 = false) {
  if constexpr (D == 128) {
    if (pr.max_seqlen_k > 256 || !fits_key_block(pr, 128)) {
      if (fits_key_block(pr, 256)) {
        return fast_exp2 ? run_fp8_tiles<D, 2, true, kFastExp2Every, kFusedTurnMmaRowSumCrossTileTmaStore, 256, true>(pr)
                         : run_fp8_tiles<D, 2, true, 0, kFusedTurnMmaRowSumCrossTileTmaStore, 256, true>(pr);
      }
      if (fits_key_block(pr, 192)) return run_fp8_tiles<D, 0, true, 4, kFusedTurn, 192, true>(pr);
    }
  }
  return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 128, true, D == 64 ? 3 : 2>(pr);
}

template <int D>
int run_fp8_headdim(const Fp8Problem& pr, int variant) {
  if (variant == 19 || variant == 56) {  // the default with the causal deal before 2026-12-01 (as bf16 variant 7), or
                                        // with one section over every tile (Problem::causal_deal 2)
    Fp8Problem dealt = pr;
    dealt.causal_deal = variant == 19 ? 0 : 2;
    return run_fp8_headdim<D>(dealt, 0);
  }
  if (variant == 0) return run_fp8_default<D>(pr);
  if (variant == 53) return run_fp8_default<D>(pr, /*fast_exp2=*/true);
  if (variant == 20) return run_fp8_tiles<D, 0>(pr);
  if (variant == 22 || variant == 12) return run_fp8_tiles<D, 0, true, 0, kNoExperiment, 128, true>(pr);
  if constexpr (D == 128) {
    if (variant == 21) return run_fp8_tiles<D, 0, true, 0, kNoExperiment, 192, true>(pr);
    if (variant == 25) return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 192, true>(pr);
    if (variant == 28) return run_fp8_tiles<D, 0, true, 4, kFusedTurn, 192, true>(pr);
    if (variant == 29) return run_fp8_tiles<D, 0, true, 8, kFusedTurn, 192, true>(pr);
    if (variant == 30) return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 256, true>(pr);
    if (variant == 31) return run_fp8_tiles<D, 0, true, 4, kFusedTurn, 256, true>(pr);
    if (variant == 32) return run_fp8_tiles<D, 0, true, 8, kFusedTurn, 256, true>(pr);
    if (variant == 33) return run_fp8_tiles<D, 0, true, 16, kFusedTurn, 256, true>(pr);
    if (variant == 34) return run_fp8_tiles<D, 0, true, 0, kFusedTurnSplitS, 256, true>(pr);
    if (variant == 35) return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 128, true, 3>(pr);
    if (variant == 36) return run_fp8_tiles<D, 0, true, 0, kFusedTurnCutRowMax, 256, true>(pr);
    if (variant == 37) return run_fp8_tiles<D, 0, true, 0, kFusedTurnSplitSIntMax, 256, true>(pr);
    if (variant == 38) return run_fp8_tiles<D, 0, true, 0, kFusedTurnIntMax, 128, true, 3>(pr);
    if (variant == 41) return run_fp8_tiles<D, 0, true, 0, kFusedTurnIntMax, 256, true>(pr);
    if (variant == 43) return run_fp8_tiles<D, 0, true, 0, kFusedTurnSoftmaxTurns, 256, true>(pr);
    if (variant == 45) return run_fp8_tiles<D, 2, true, 0, kFusedTurnMmaRowSum, 256, true>(pr);
    if (variant == 46) return run_fp8_tiles<D, 2, true, 0, kFusedTurnSplitSIntMax, 256, true>(pr);
    if (variant == 48) return run_fp8_tiles<D, 2, true, -4, kFusedTurnMmaRowSum, 256, true>(pr);
    if (variant == 49) return run_fp8_tiles<D, 2, true, -2, kFusedTurnMmaRowSum, 256, true>(pr);
    if (variant == 50) return run_fp8_tiles<D, 2, true, -1, kFusedTurnMmaRowSum, 256, true>(pr);
    if (variant == 54) return run_fp8_tiles<D, 2, true, 0, kFusedTurnMmaRowSumCrossTile, 256, true>(pr);
  }
  if constexpr (D == 64) {
    if (variant == 27) return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 128, true, 3>(pr);
    if (variant == 40) return run_fp8_tiles<D, 0, true, 0, kFusedTurnIntMax, 128, true, 3>(pr);
  }
  if (variant == 24) return run_fp8_tiles<D, 0, true, 0, kFusedTurn, 128, true>(pr);
  if (variant == 39) return run_fp8_tiles<D, 0, true, 0, kFusedTurnIntMax, 128, true>(pr);
  if (variant == 5) {
    Fp8Problem per_tile = pr;
    per_tile.one_cta_per_tile = true;
    return run_fp8_default<D>(per_tile);
  }
  if constexpr (D != 64) {
    if (variant == 1) return run_fp8_tiles<D, 0, false>(pr);
    if (variant == 2) return run_fp8_tiles<D, 2>(pr);
  }
  if constexpr (D == 128) {
    if (variant == 3) return run_fp8_tiles<D, 0, true, 4>(pr);
    if (variant == 6) return run_fp8_tiles<D, 0, true, 0, kSkipSoftmax>(pr);
    if (variant == 7) return run_fp8_tiles<D, 0, true, 0, kPlainPvWait>(pr);
    if (variant == 9) return run_fp8_tiles<D, 0, true, 0, kSkipKVLoads>(pr);
    if (variant == 10) return run_fp8_tiles<D, 0, true, 0, kNoExperiment, 192>(pr);
    if (variant == 11) return run_fp8_tiles<D, 0, true, 0, kSkipSoftmax, 192>(pr);
    if (variant == 13) return run_fp8_tiles<D, 0, true, 4, kNoExperiment, 192>(pr);
    if (variant == 14) return run_fp8_tiles<D, 0, false, 0, kNoExperiment, 192>(pr);
    if (variant == 15) return run_fp8_tiles<D, 0, true, 0, kCutExp2, 192>(pr);
    if (variant == 16) return run_fp8_tiles<D, 0, true, 0, kCutRowMax, 192>(pr);
    if (variant == 17) return run_fp8_tiles<D, 0, true, 0, kSkipKVLoads, 192>(pr);
    if (variant == 18) return run_fp8_tiles<D, 0, true, 0, kSkipSoftmaxAndKVLoads, 192>(pr);
  }
  return fail("%s", "unknown FP8 variant for this head dim (0 = default, 5 = one CTA per tile, 19 = the "
                    "L2-section causal deal, 56 = one causal section; 1, 2 = benchmark variants at d128/d256, 3, 6, "
                    "7, 9-11, 13-18, 21, 25, 28-38, 41, 43, 45, 46, 48-50, 54 at d128, 40 at d64, 12, 20, 22, 24, "
                    "39, 53 at every head dim)");
}

int run_fp8_d64(const Fp8Problem& pr, int variant);
int run_fp8_d128(const Fp8Problem& pr, int variant);
int run_fp8_d256(const Fp8Problem& pr, int variant);

}  // namespace fa3nn::hopper::host
