// Host-side launch of the Hopper backward: preprocess, main kernel, postprocess on one stream, no synchronization.
// Included by one translation unit per head dim (flash_bwd_d*.cu); flash_bwd_api.cu holds the C ABI.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "bwd_deal_model.cuh"
#include "flash_bwd.cuh"
#include "flash_bwd_cols.cuh"
#include "flash_bwd_mla.cuh"
#include "flash_bwd_mla_keys.cuh"
#include "flash_bwd_overlap.cuh"
#include "flash_bwd_prepost.cuh"
#include "flash_fwd_launch.cuh"  // fail(), encode_map(), make_map(), configure_smem(), check_launch()

namespace fa3nn::hopper::host {

// A backward call. Workspaces come from the caller (torch allocates them): dq_accum (batch, nheads, seqlen_q_rounded,
// d) fp32, lse_log2 and delta (batch, nheads, seqlen_q_rounded) fp32 (bwd_workspace_rows). k, v, dk, dv have
// nheads_kv heads, which divides nheads (GQA/MQA: query head h reads K/V head h / (nheads / nheads_kv), the forward's
// convention). Varlen (cu_seqlens_q / cu_seqlens_k, (batch + 1) int32 on the device): batch sequences packed into one
// batch of seqlen_q / seqlen_k rows (the totals), the longest max_seqlen_q / max_seqlen_k, lse (nheads, seqlen_q), the
// workspaces (1, nheads, seqlen_q_rounded) in flash_bwd_seq.cuh's layout; dk and dv zeroed by the caller (the tiles
// of sequences without queries are skipped); the batch strides are not read. Dense: max_seqlen_* = seqlen_*.
struct BwdProblem {
  const void *dout, *q, *k, *v, *out;
  const float *lse, *dlse;  // dlse may be null
  void *dq, *dk, *dv;
  float *dq_accum, *lse_log2, *delta;
  const int *cu_seqlens_q, *cu_seqlens_k;  // null: dense
  int batch, seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim;
  const int64_t* strides;  // q, k, v, out, dout, dq, dk, dv: (batch, row, head) each, in elements
  float softmax_scale;
  int grid_order;  // 0 auto (auto_key_blocks_outer), 1 key blocks innermost, 2 outermost, 3 outermost per batch
  cudaStream_t stream;
  int prepost_vec = 1;  // 0: the 2-byte preprocess / postprocess kernels even where 16-byte ones could run
  int ctas = 0;  // main kernel CTAs: 0 auto (auto_persistent_bwd), kCtasAutoUniform, -1 one per tile, n > 0 at most n
  int dkdv_vec16 = 1;   // 0: dK / dV stored 4 bytes at a time even where 16-byte stores could run
  // local: the BwdConfig::kLocal kernels (dense or varlen); dk and dv zeroed by the caller (tiles no window reaches
  // are skipped).
  WindowArgs window;
  // > 0: softmax(softcap * tanh(scores * softmax_scale / softcap)), the BwdConfig::kSoftcap kernels (default variants).
  float softcap = 0.f;
  int headdim_v = 0;  // v's, out's, dout's and dv's head dim: Cfg::kHeadDimV (headdim but at 192 / 128)
  // GQA in parts (BwdParams::kv_parts): a divisor of the group; above 1, dk and dv are fp32 buffers
  // of kv_parts x nheads_kv heads (head h * kv_parts + part: that part's sum over its query heads), with their strides
  // in st[18..23], in elements, which the caller sums over the parts.
  int kv_parts = 1;
};

// The variant bit that selects the 2-byte preprocess / postprocess kernels (benchmarks: fa3nn_hopper_bwd).
constexpr int kScalarPrePostBit = 16;
// The variant bit that stores dK / dV 4 bytes at a time where 16-byte stores could run (benchmarks, tests).
constexpr int kScalarDKDVBit = 32;

// Whether auto runs the main kernel persistent: grid = SMs, each CTA chaining tiles (BwdCtaTiles, flash_bwd.cuh),
// where a tile is short: at most 1024 query rows per tile (seqlen_q x the GQA group) non-causal, 4096 causal. H200,
// whole backward with 16-byte dK / dV stores, persistent x one CTA per tile at 512 / 1k / 2k / 4k / 16k
// (benchmarks/NOTES.md): non-causal d128 1.028 / 1.017 / 0.975 / 0.991 / 0.994, d64 1.074 / 1.035 / 1.004 / 1.005 /
// 1.005 (s27d); causal, dealt boustrophedon (BwdCtaTiles), d128 1.025 / 1.028 / 1.045 / 1.015 / 0.725, d64 1.075 /
// 1.048 / 1.031 / 1.019 / 0.968 (s28a; at 16k a CTA's tiles differ by up to 128 key blocks' work).
// Varlen: never (skips_empty_tiles), unless every sequence has one query length and one key length (auto_persistent_bwd,
// kCtasAutoUniform): then no tile is empty, the tiles are the dense call's, and so is the rule. Otherwise the grid
// counts the longest sequence's key blocks for every sequence, so the static deal hands some CTAs rounds of empty
// tiles while others get the long ones; one CTA per tile lets the hardware balance them (empty ones exit at once).
// H200, 16384 packed tokens, d128 / d64 TFLOP/s, per tile x persistent (key blocks innermost; benchmarks/NOTES.md,
// s29b): lengths uniform in [256, 4096] 460 / 426 and 405 / 364 non-causal, 417 / 307 and 360 / 308 causal; in
// [32, 1024] 345 / 296, 294 / 268, 239 / 215, 202 / 196; all 2048: 462 / 455, 415 / 419, 381 / 395, 351 / 362. H100
// (s45l, scripts/bwd_varlen_ab.py --schedules): all 2048 d128 493.7 / 514.4, 393.2 / 418.7, d64 440.3 / 453.5,
// 345.3 / 366.1 (non-causal, causal); all 512 d128 306.0 / 296.6, 168.9 / 159.3, d64 281.4 / 284.5, 168.3 / 168.1;
// lengths in [256, 4096] 0.70-0.95x, in [32, 1024] 0.78-0.89x.
// Windows (kLocal): never either; one CTA per SM chaining tiles measured 1-13% slower on causal windows (1024, 0) /
// (4096, 0) at 4k / 16k (s31c, scripts/window_ab.py).
// Multi-head latent attention (BwdConfig::kPanelSplit): never. H100, scripts/bwd_schedule_ab.py, persistent x one
// CTA per tile, 64-key blocks at 512 / 1k / 2k / 4k: causal 0.91 / 0.91 / 0.87 / 0.83, non-causal 0.93 / 1.00 (s38f);
// 128-key blocks (kMlaKeySplit) at 2k / 8k: causal 0.982 / 0.884, non-causal 0.995 / 1.033 (s43d).
// Head dim 128 since its default took FlashAttention-3's order (286f709): persistent for causal tiles of 2048-8192
// rows only. H100, s42c, scripts/bwd_schedule_ab.py (3 rounds), persistent x one CTA per tile at 512 / 1k / 2k / 4k /
// 8k: causal 0.948 / 0.972 / 1.010 / 1.004 / 1.040, non-causal 0.984 / 1.002 / 0.974 / 1.000 / 1.014 (16k causal:
// 0.725 on the older order, s28a, so 8k stays the bound).
// Head dim 256 (the column split): never. H100, s44b, scripts/bwd_schedule_ab.py (3 rounds), persistent x one CTA per
// tile at 512 / 1k / 2k / 4k / 8k: causal 0.921 / 0.937 / 0.958 / 0.970 / 0.702, non-causal 0.955 / 0.986 / 0.996 /
// 0.989 / 0.961 (the rule above, measured on the s30 kernel at 0.97-1.02, had it persistent up to 4096 causal rows).
inline bool use_persistent_bwd(int headdim, bool causal, int group, int seqlen_q, bool skips_empty_tiles,
                               bool panel_split) {
  if (skips_empty_tiles || panel_split || headdim == 256) return false;
  const long long rows = static_cast<long long>(group) * seqlen_q;
  if (headdim == 128) return causal && rows >= 2048 && rows <= 8192;
  return rows <= (causal ? 4096 : 1024);
}

// BwdProblem::ctas for auto on a varlen call whose sequences all have one query length and one key length, both
// positive (the caller checks: hopper_bwd.py, uniform_lengths).
constexpr int kCtasAutoUniform = -2;

// Whether a launch with `ctas` (BwdProblem::ctas) runs auto's persistent form: use_persistent_bwd, with varlen
// tiles counted as possibly empty unless the caller said every sequence has one length (kCtasAutoUniform), and
// windows' always.
inline bool auto_persistent_bwd(int ctas, int headdim, bool causal, bool varlen, bool local, int group, int seqlen_q,
                                bool panel_split) {
  if (ctas != 0 && ctas != kCtasAutoUniform) return false;
  return use_persistent_bwd(headdim, causal, group, seqlen_q, local || (varlen && ctas != kCtasAutoUniform),
                            panel_split);
}

// The most (K/V head, batch) pairs for which auto's persistent causal MHA deal takes key blocks outermost (below).
constexpr int kOuterPairsMax = 16;
// Head dim 64's, persistent: key blocks outermost x persistent innermost (H100, s55b, scripts/bwd_schedule_grid.py
// rows 38-41, causal MHA): one 4k x 20 / 24 heads 1.31 / 1.22, one 2k x 24 1.14, 3 x 4k x 16 (48 pairs) 1.08, where
// d128 loses from 32 pairs (below): d64's Q / dO rows are half d128's bytes. As auto (s56a, rows 42-51): innermost
// 0.90-0.99x it at 32 / 48 pairs, outermost 0.55-0.93x innermost from 64 pairs (the paper's d64 4k is 128, 2k 256).
constexpr int kOuterPairsMaxD64Persistent = 48;
// Head dim 64's, one CTA per tile (causal beyond 4096 rows), where each pair has at most kOuterTileBlocksD64Wide key
// blocks: per tile outermost x auto (innermost past 16 pairs), one 8k x 16 / 20 / 24 / 28 / 32 heads 1.00 / 1.06 /
// 1.05 / 1.04 / 1.01 (H100 s57b, scripts/bwd_schedule_grid.py rows 15, 52, 50, 53, 51; s56a 24 / 32: 1.05-1.06 /
// 1.01). The gain fades as the pairs' Q / dO (2 MB a pair at 8k) outgrow the 50 MB L2, so 28 pairs, and only at the
// measured 64 key blocks: longer pairs keep kOuterPairsMax (not measured past 16 there).
constexpr int kOuterPairsMaxD64PerTile = 28;
constexpr int kOuterTileBlocksD64Wide = 64;
inline int outer_pairs_max(int headdim, bool auto_persistent, int n_blocks) {
  if (headdim != 64) return kOuterPairsMax;
  if (auto_persistent) return kOuterPairsMaxD64Persistent;
  return n_blocks <= kOuterTileBlocksD64Wide ? kOuterPairsMaxD64PerTile : kOuterPairsMax;
}

// Whether the main kernel's tiles run key blocks outermost (bwd_tile): grid_order 2, or auto (0) on dense causal
// calls that are GQA/MQA (group > 1, the real group: parts keep it; tile_order runs it per batch where one CTA runs
// each tile), or MHA over at most kOuterPairsMax (K/V head, batch) pairs (d64: outer_pairs_max) run
// persistent by auto or, with at most kOuterTileBlocksMax key blocks each, one CTA per tile. Persistent innermost
// deals each round of SMs tiles from one or two pairs' key blocks, so with few pairs a CTA's tiles are all long or
// all short; outermost deals key block 0 of every pair first. H200, s50c (scripts/bwd_schedule_grid.py), persistent
// outermost x auto (persistent innermost), causal d128: 1 x 8k x 8 heads (8 pairs) 1.67, 1 x 8k x 16 1.43, 2 x 4k x 8
// 1.42 (the schedule model: 1.80 / 1.52 / 1.51); from 32 pairs up it loses (0.98 / 0.99 / 0.99 at 1 x 8k / 4k / 2k x
// 32 heads, 0.93 at the paper's 2 x 8k x 16, 0.91 at 64 pairs, 0.68 at 8 x 2k x 16): key block 0 of every pair in
// flight reads every pair's Q / dO, past L2.
// MHA run one CTA per tile (`per_tile`: not persistent, auto's or the caller's) over at most kOuterPairsMax pairs
// takes outermost too where each pair has at most kOuterTileBlocksMax key blocks (`n_blocks`). The schedule model
// (scripts/model_bwd_gqa_parts.py per_tile: each tile to the SM that frees up first, no L2) puts outermost /
// innermost at 1.11 for 64 key blocks x 16 pairs (measured 1.10 / 1.11 at d64 one causal 8k x 16 heads, H100 s51a /
// H200 s50c), 1.23 at 8 pairs, 1.03-1.12 at 96 blocks, and 1.00 from 128 blocks up, where outermost's L2 cost is
// all that is left (0.93-1.00 measured at d128 16k x 8 / 16 heads, d256 8k x 8). Measured as auto (H100, s53a),
// this rule x one CTA per tile innermost, causal: d64 one 8k x 8 heads 1.20 (model 1.23), 2 x 8k x 8 1.10 (1.11),
// one 8k x 16 1.09 (1.11); d256 one 4k x 8 1.16 (1.23), one 2k x 8 1.37 (1.56); d64 16k x 8 / 16 1.00 / 1.01.
constexpr int kOuterTileBlocksMax = 96;

inline bool auto_key_blocks_outer(int grid_order, int headdim, bool causal, bool varlen, int group,
                                  bool auto_persistent, bool per_tile, long long pairs, int n_blocks) {
  if (grid_order != 0) return grid_order == 2;
  if (!causal || varlen) return false;
  if (group > 1) return true;
  if (pairs > outer_pairs_max(headdim, auto_persistent, n_blocks)) return false;
  return auto_persistent || (per_tile && n_blocks <= kOuterTileBlocksMax);
}

// BwdParams::tile_order of a call: grid_order 3 runs key blocks outermost within each batch (K/V heads fastest, then
// key blocks, then batch: the long causal tiles of one batch's pairs first, the CTAs in flight reading one batch's
// Q / dO); auto takes it where auto_key_blocks_outer picks outermost for dense causal GQA/MQA run one CTA per tile
// (`per_tile`: not persistent, auto's or the caller's). H100, s51a (scripts/bwd_schedule_grid.py), per batch x
// outermost, causal: the llama-1b recipe's 8 x 4k 32 / 8 d64 1.65x (whole groups; 0.76 -> 1.25x cuDNN: outermost
// keeps 64 pairs' Q / dO in flight, past L2), 2 x 4k 32 / 8 d128 1.10x, MQA 2 x 8k 16 / 1 in 4 parts 1.03x; at
// batch 1 the two orders are the same tiles in the same order. Persistent keeps outermost: a round of 132 tiles per
// batch is one or two key blocks of it, which deals the long tiles to few CTAs (per batch 0.74-0.80x there).
inline BwdTileOrder tile_order(int grid_order, int headdim, bool causal, bool varlen, int group, bool auto_persistent,
                               bool per_tile, long long pairs, int n_blocks) {
  if (grid_order == 3) return kKeyBlocksPerBatch;
  if (!auto_key_blocks_outer(grid_order, headdim, causal, varlen, group, auto_persistent, per_tile, pairs, n_blocks))
    return kKeyBlocksInner;
  return grid_order == 0 && group > 1 && per_tile ? kKeyBlocksPerBatch : kKeyBlocksOuter;
}

// Whether auto's persistent form gives way to one CTA per tile because its static deal is modelled to lose
// (bwd_deal_model.cuh, with the measurements): causal calls whose persistent deal would run key blocks innermost
// (tile_order: MHA over more than kOuterPairsMax (head, batch) pairs, grid_order 0 or 1). Head dim 128 only: at d64
// one CTA per tile measured 0.94-1.12x the deal at 20-48 pairs (H100 s55b), where key blocks outermost, which
// outer_pairs_max takes there, measured 1.08-1.31x. As auto (H100, s54d; the same launch as one CTA per tile
// innermost there), TFLOP/s against the persistent deal and cuDNN: one 8k x 24 heads 535-552 / 436 / 484, one 8k x
// 40 518-548 / 459 / 503, 3 x 8k x 16 514-531 / 473 / 492, one 4k x 48 486-487 / 447 / 460; where it keeps the deal
// (the paper's 2 x 8k x 16, one 8k x 32, 6 x 4k x 16, 5 x 2k x 16) auto is unchanged.
inline bool static_deal_gives_way(int headdim, bool causal, bool varlen, int group, int grid_order, long long pairs,
                                  int n_blocks, int seqlen_q, int seqlen_k, int block_n, int block_m, int sms) {
  if (headdim != 128 || !causal ||
      tile_order(grid_order, headdim, causal, varlen, group, true, false, pairs, n_blocks) != kKeyBlocksInner)
    return false;
  return per_tile_beats_static_deal(pairs, block_n, block_m, seqlen_q, seqlen_k, sms);
}

inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }
inline bool strides_of_8(std::initializer_list<int64_t> strides) {
  for (const int64_t s : strides)
    if (s % 8 != 0) return false;
  return true;
}

// Rows per query head of the workspaces (kBwdRowsRounding, flash_bwd_seq.cuh, the largest BwdConfig::kBlockM, so
// every variant reads whole query blocks of lse_log2 / delta without bounds checks): dense, seqlen_q rounded up;
// varlen, every sequence at its padded offset (varlen_ws_row0 of the end). Python's hopper_bwd.workspace_shape agrees.
inline int bwd_workspace_rows(int seqlen_q, int batch, bool varlen) {
  return varlen ? varlen_ws_row0(seqlen_q, batch) : round_up_rows(seqlen_q);
}

template <class Cfg>
int launch_bwd(const BwdProblem& pr) {
  const int64_t* st = pr.strides;
  static_assert(kBwdRowsRounding % Cfg::kBlockM == 0, "the workspaces must hold whole query blocks");
  const bool varlen = pr.cu_seqlens_q != nullptr;
  if (varlen != Cfg::kVarlen) return fail("%s", "internal: a varlen call reached a dense backward kernel or back");
  const int seqlen_q_rounded = bwd_workspace_rows(pr.seqlen_q, pr.batch, varlen);
  const int map_batch = varlen ? 1 : pr.batch;  // varlen: one packed batch (its batch stride is never used)
  if (pr.headdim != Cfg::kHeadDim || pr.headdim_v != Cfg::kHeadDimV)
    return fail("%s", "internal: a call reached a backward kernel of other head dims");

  BwdPrePostParams pp{};
  pp.out = pr.out;
  pp.dout = pr.dout;
  pp.lse = pr.lse;
  pp.dlse = pr.dlse;
  pp.cu_seqlens_q = pr.cu_seqlens_q;
  pp.dq = pr.dq;
  pp.dq_accum = pr.dq_accum;
  pp.lse_log2 = pr.lse_log2;
  pp.delta = pr.delta;
  pp.out_batch_stride = st[9], pp.out_row_stride = st[10], pp.out_head_stride = st[11];
  pp.dout_batch_stride = st[12], pp.dout_row_stride = st[13], pp.dout_head_stride = st[14];
  pp.dq_batch_stride = st[15], pp.dq_row_stride = st[16], pp.dq_head_stride = st[17];
  pp.seqlen_q = pr.max_seqlen_q;
  pp.seqlen_q_rounded = seqlen_q_rounded;
  pp.lse_rows = pr.seqlen_q;
  pp.nheads = pr.nheads;
  pp.softmax_scale = pr.softmax_scale;
  if (pr.batch == 0 || pr.nheads == 0 || pr.seqlen_q == 0 || pr.seqlen_k == 0) return 0;  // caller zero-fills

  CUtensorMap tq, tk, tv, tdo;
  if (!make_map(&tq, pr.q, Cfg::kBF16, pr.headdim, pr.seqlen_q, pr.nheads, map_batch, st[1], st[2],
                map_batch_stride(varlen, st[0], pr.seqlen_q, st[1]), Cfg::kBlockM) ||
      !make_map(&tk, pr.k, Cfg::kBF16, pr.headdim, pr.seqlen_k, pr.nheads_kv, map_batch, st[4], st[5],
                map_batch_stride(varlen, st[3], pr.seqlen_k, st[4]), Cfg::kBlockN) ||
      !make_map(&tv, pr.v, Cfg::kBF16, Cfg::kHeadDimV, pr.seqlen_k, pr.nheads_kv, map_batch, st[7], st[8],
                map_batch_stride(varlen, st[6], pr.seqlen_k, st[7]), Cfg::kBlockN) ||
      !make_map(&tdo, pr.dout, Cfg::kBF16, Cfg::kHeadDimV, pr.seqlen_q, pr.nheads, map_batch, st[13], st[14],
                map_batch_stride(varlen, st[12], pr.seqlen_q, st[13]), Cfg::kBlockM))
    return fail("%s", "cuTensorMapEncodeTiled failed (pointers must be 16-B aligned, strides multiples of 8 elements)");
  // dq_accum (batch, nheads, seqlen_q_rounded, d) fp32, contiguous, as the bulk dQ path's reduce target: boxes of
  // kDQTileRows = 64 rows x 32 columns (128 B, the 128B swizzle's span), the layout BwdConsumer::stage_dq writes.
  // Read only by the bulk dQ variants.
  CUtensorMap tdq{};
  const int64_t accum_row_bytes = int64_t(pr.headdim) * 4, accum_head_bytes = seqlen_q_rounded * accum_row_bytes;
  if (Cfg::kDQBulk && !encode_map(&tdq, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, pr.dq_accum,
                                  {pr.headdim, seqlen_q_rounded, pr.nheads, map_batch},
                                  {accum_row_bytes, accum_head_bytes, pr.nheads * accum_head_bytes},
                                  {Cfg::kDQPanelCols, Cfg::kDQTileRows, 1, 1}, CU_TENSOR_MAP_SWIZZLE_128B))
    return fail("%s", "cuTensorMapEncodeTiled failed for dq_accum (it must be contiguous fp32, 16-B aligned)");

  BwdParams p{};
  p.dq_accum = pr.dq_accum;
  p.lse_log2 = pr.lse_log2;
  p.delta = pr.delta;
  p.dk = pr.dk;
  p.dv = pr.dv;
  p.dk_batch_stride = st[18], p.dk_row_stride = st[19], p.dk_head_stride = st[20];
  p.dv_batch_stride = st[21], p.dv_row_stride = st[22], p.dv_head_stride = st[23];
  p.cu_seqlens_q = pr.cu_seqlens_q;
  p.cu_seqlens_k = pr.cu_seqlens_k;
  p.seqlen_q = pr.max_seqlen_q;
  p.seqlen_k = pr.max_seqlen_k;
  p.seqlen_q_rounded = seqlen_q_rounded;
  p.nheads = pr.nheads;
  const int group = pr.nheads / pr.nheads_kv;  // kv_parts divides it (fa3nn_hopper_bwd checks)
  const int tile_heads = pr.nheads_kv * pr.kv_parts;  // the tiles' K/V heads: parts of each group
  p.group = group / pr.kv_parts;
  p.kv_parts = pr.kv_parts;
  p.dkdv_f32 = pr.kv_parts > 1;
  p.num_m_blocks = (pr.max_seqlen_q + Cfg::kBlockM - 1) / Cfg::kBlockM;
  p.scale_log2 = pr.softmax_scale * 1.4426950408889634f;
  p.softmax_scale = pr.softmax_scale;
  if ((pr.softcap > 0.f) != Cfg::kSoftcap)
    return fail("%s", "internal: a softcap call reached a backward kernel without softcap or back");
  if constexpr (Cfg::kSoftcap) fold_softcap(p, pr.softmax_scale, pr.softcap);  // the forward's folding
  p.window_left = pr.window.left;
  p.window_right = pr.window.right;
  if (pr.window.local != Cfg::kLocal)
    return fail("%s", "internal: a window call reached a kernel without windows or back");

  // 16-byte accesses where the tensors allow them (PrePostVec), each pass by its own: the preprocess reads out and
  // dout, the postprocess writes dq; both access dq_accum (torch allocates it aligned; checked for C callers).
  using Vec = PrePostVec<Cfg::kHeadDimV>;      // the preprocess's rows (out, dout)
  using VecDQ = PrePostVec<Cfg::kHeadDim>;     // the postprocess's (dq)
  static_assert(kBwdRowsRounding % Vec::kRowsPerBlock == 0, "the preprocess grid covers seqlen_q_rounded rows");
  const bool vec_ok = pr.prepost_vec != 0 && aligned16(pr.dq_accum);
  const bool vec_pre = vec_ok && aligned16(pr.out) && aligned16(pr.dout) &&
                       strides_of_8({st[9], st[10], st[11], st[12], st[13], st[14]});
  const bool vec_post = vec_ok && aligned16(pr.dq) && strides_of_8({st[15], st[16], st[17]});
  if (vec_pre) {
    const dim3 rows_grid(round_up_rows(pr.max_seqlen_q) / Vec::kRowsPerBlock, pr.nheads, pr.batch);
    flash_bwd_preprocess_vec_kernel<Cfg::kHeadDim, Cfg::kHeadDimV, Cfg::kBF16><<<rows_grid, 256, 0, pr.stream>>>(pp);
  } else {
    const dim3 rows_grid(round_up_rows(pr.max_seqlen_q) / kPrePostRowsPerBlock, pr.nheads, pr.batch);
    flash_bwd_preprocess_kernel<Cfg::kHeadDim, Cfg::kHeadDimV, Cfg::kBF16><<<rows_grid, 256, 0, pr.stream>>>(pp);
  }

  auto kernel = flash_bwd_kernel<Cfg>;
  if (const int status = configure_smem<Cfg>(kernel)) return status;
  // One tile per (key block, K/V head, batch): it walks the group's query heads (BwdQueryWalk). Under a causal mask
  // key block 0 has the most query blocks (times group under GQA). Key blocks innermost (the MHA order) start the
  // longest tile of each (K/V head, batch) first; outermost start all of them first (bwd_tile), which a greedy model
  // of the 132 SMs puts at 0.97-0.99 of ideal against 0.62-0.81 innermost for 16 query heads on 4 or 2 K/V heads at
  // seqlen 2048-8192 (benchmarks/NOTES.md, "In-kernel GQA"), so auto picks it for causal GQA/MQA; MHA keeps its order
  // but where auto runs it persistent over few (head, batch) pairs (auto_key_blocks_outer).
  // Varlen keeps key blocks innermost: causal, 16384 packed tokens, GQA 4, one CTA per tile, innermost x outermost
  // (H200, s29c): lengths in [256, 4096] 1.15 (d64) / 0.98 (d128), in [32, 1024] 1.14 / 1.07, all 2048 0.93 / 0.89
  // (geometric mean 1.02); MHA 0.74-0.98x outermost in every varlen row (empty tiles and Q / dO's L2 reuse).
  // Persistent (ctas > 0, or auto where use_persistent_bwd: one CTA per SM): each CTA walks tiles blockIdx.x + k *
  // gridDim.x in the same order, so the CTAs in flight hold the tiles one CTA per tile would.
  const int n_blocks = (pr.max_seqlen_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  static const int sms = num_sms();
  const long long pairs = static_cast<long long>(tile_heads) * pr.batch;
  const bool auto_persistent =
      auto_persistent_bwd(pr.ctas, Cfg::kHeadDim, Cfg::kCausal, Cfg::kVarlen, Cfg::kLocal, p.group, pr.max_seqlen_q,
                          Cfg::kPanelSplit) &&
      !static_deal_gives_way(Cfg::kHeadDim, Cfg::kCausal, varlen, group, pr.grid_order, pairs, n_blocks,
                             pr.max_seqlen_q, pr.max_seqlen_k, Cfg::kBlockN, Cfg::kBlockM, sms);
  // (GQA in parts keeps the GQA order: its parts' key block 0 tiles are as long as MHA's, as many as the group's.)
  p.tile_order = tile_order(pr.grid_order, Cfg::kHeadDim, Cfg::kCausal, varlen, group, auto_persistent,
                            !auto_persistent && pr.ctas <= 0, pairs, n_blocks);
  const long long tiles = pairs * n_blocks;
  // Below 2^30, so that a CTA's next tile index (tile + gridDim.x, BwdCtaTiles) stays an int.
  if (tiles >= (1LL << 30)) return fail("%s", "too many key blocks x K/V heads x batch for one launch (2^30 at most)");
  p.num_tiles = static_cast<int>(tiles);
  p.tile_inner = FastDiv(p.tile_order == kKeyBlocksInner ? n_blocks : tile_heads);
  p.tile_middle = FastDiv(p.tile_order == kKeyBlocksInner ? tile_heads
                          : p.tile_order == kKeyBlocksOuter ? pr.batch
                                                            : n_blocks);
  const int ctas = pr.ctas > 0 ? pr.ctas : auto_persistent ? sms : p.num_tiles;
  const int grid = ctas < p.num_tiles ? ctas : p.num_tiles;
  // 16-byte dK / dV stores (BwdConsumer::store_rows) where both are 16-B aligned with strides of multiples of 8.
  p.dkdv_vec16 = pr.dkdv_vec16 != 0 && !p.dkdv_f32 && aligned16(pr.dk) && aligned16(pr.dv) &&
                 strides_of_8({st[18], st[19], st[20], st[21], st[22], st[23]});
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, pr.stream>>>(tq, tk, tv, tdo, tdq, p);

  if (vec_post) {
    const dim3 post_grid((pr.max_seqlen_q + VecDQ::kRowsPerBlock - 1) / VecDQ::kRowsPerBlock, pr.nheads, pr.batch);
    flash_bwd_postprocess_vec_kernel<Cfg::kHeadDim, Cfg::kBF16><<<post_grid, 256, 0, pr.stream>>>(pp);
  } else {
    const dim3 post_grid((pr.max_seqlen_q + kPrePostRowsPerBlock - 1) / kPrePostRowsPerBlock, pr.nheads, pr.batch);
    flash_bwd_postprocess_kernel<Cfg::kHeadDim, Cfg::kBF16><<<post_grid, 256, 0, pr.stream>>>(pp);
  }
  return check_launch("backward launch: %s");
}

// K/V stay resident per CTA, so the ring holds only Q, dO, lse, delta: d128 2 stages = 161 KB of shared memory
// (K 32 + V 32 + Q 2x16 + dO 2x16 + dS 2x16 + 1 KB row stats), d64 3 stages = 113.5 KB (K 16 + V 16 + Q 3x8 +
// dO 3x8 + dS 2x16 + 1.5 KB row stats); kSmemBytes adds the barriers and 1 KB of alignment slack (162.0 / 114.6 KB).
// The bulk dQ variant adds two 32 KB fp32 dQ buffers: d128 226.0 KB (of 227), d64 178.6 KB. d64 with 128-row query
// blocks (m128): K 16 + V 16 + Q 2x16 + dO 2x16 + dS 2x32 + one 32 KB dQ buffer + 2 KB row stats = 194 KB (+ 1.1).
// d256 (64-key blocks, flash_bwd_cols.cuh): K 32 + V 32 + Q 2x32 + dO 2x32 + dS^T 2x8 + P^T 2x8 + 1 KB row stats =
// 225 KB (+ 1.1), which is why its bulk dQ stages in the ring (BwdConfig::kDQInRing).
template <int D, int kBlockM> struct BwdTiles;
template <> struct BwdTiles<64, 64> { static constexpr int kStages = 3; };
template <> struct BwdTiles<64, 128> { static constexpr int kStages = 2; };
template <> struct BwdTiles<128, 64> { static constexpr int kStages = 2; };
template <> struct BwdTiles<256, 64> { static constexpr int kStages = 2; };
// Multi-head latent attention (192 / 128, flash_bwd_mla.cuh): K 24 + V 16 + Q 2x24 + dO 2x16 + dS^T 2x8 + P^T 2x8 +
// one 48 KB bulk dQ buffer + 1 KB row stats = 201 KB (+ 1.1).
template <> struct BwdTiles<192, 64> { static constexpr int kStages = 2; };

template <int D, bool kDQBulk, bool kOverlap, int kBlockM = 64, bool kVarlen = false, bool kSoftcap = false>
int run_bwd_dispatch(const BwdProblem& pr, bool bf16, bool causal) {
  constexpr int S = BwdTiles<D, kBlockM>::kStages;
  constexpr bool V = kVarlen, C = kSoftcap;
  if (bf16)
    return causal ? launch_bwd<BwdConfig<D, S, true, true, kDQBulk, kOverlap, kBlockM, V, false, C>>(pr)
                  : launch_bwd<BwdConfig<D, S, true, false, kDQBulk, kOverlap, kBlockM, V, false, C>>(pr);
  return causal ? launch_bwd<BwdConfig<D, S, false, true, kDQBulk, kOverlap, kBlockM, V, false, C>>(pr)
                : launch_bwd<BwdConfig<D, S, false, false, kDQBulk, kOverlap, kBlockM, V, false, C>>(pr);
}

// Varlen, window and softcap kernels are built for each head dim's default variant only (hopper_bwd.DEFAULT_VARIANTS:
// m128 at d64, bulk dQ at d128 and d256), which keeps the build's kernel count (and time) near the
// dense one's. Window kernels (BwdConfig::kLocal) take causal as a window.
constexpr int kDefaultVariant(int D) { return D == 64 ? 4 : 1; }

template <int D, bool kVarlen, bool kLocal, bool kSoftcap>
int run_bwd_default(const BwdProblem& pr, bool bf16, bool causal) {
  constexpr int kBlockM = kDefaultVariant(D) == 4 ? 128 : 64;
  if constexpr (kLocal) {
    constexpr int S = BwdTiles<D, kBlockM>::kStages;
    return bf16 ? launch_bwd<BwdConfig<D, S, true, false, true, false, kBlockM, kVarlen, true, kSoftcap>>(pr)
                : launch_bwd<BwdConfig<D, S, false, false, true, false, kBlockM, kVarlen, true, kSoftcap>>(pr);
  } else {
    return run_bwd_dispatch<D, true, false, kBlockM, kVarlen, kSoftcap>(pr, bf16, causal);
  }
}

// The default variant's kernels of a varlen, window or softcap call.
template <int D, bool kSoftcap>
int run_bwd_default_masks(const BwdProblem& pr, bool bf16, bool causal) {
  const bool varlen = pr.cu_seqlens_q != nullptr;
  if (!pr.window.local)
    return varlen ? run_bwd_default<D, true, false, kSoftcap>(pr, bf16, causal)
                  : run_bwd_default<D, false, false, kSoftcap>(pr, bf16, causal);
  return varlen ? run_bwd_default<D, true, true, kSoftcap>(pr, bf16, causal)
                : run_bwd_default<D, false, true, kSoftcap>(pr, bf16, causal);
}

// variant: 0 = dQ by per-thread red.global.add.v2.f32, 1 = bulk dQ (shared memory + TMA reduce-add, flash_bwd.cuh;
// at head dim 128 in FlashAttention-3's order, dQ staged under the dK GEMM), 2 = overlap (next block's score GEMMs
// before this block's dQ GEMM, flash_bwd_overlap.cuh), 3 = bulk dQ + overlap, 4 = bulk dQ with 128-row query blocks
// (head dim 64 only); head dim 256 has variants 0 and 1 only (the head-dim split of flash_bwd_cols.cuh; its bulk dQ
// stages in the ring). Python's DEFAULT_VARIANTS picks per head dim from measurements (fa3nn/backends/hopper_bwd.py).
template <int D>
int run_bwd_headdim(const BwdProblem& pr, bool bf16, bool causal, int variant) {
  const bool varlen = pr.cu_seqlens_q != nullptr, softcap = pr.softcap > 0.f;
  if (varlen || pr.window.local || softcap) {
    if (variant != kDefaultVariant(D))
      return fail("the %s backward is built for the default variant only (4 m128 at head dim 64, 1 bulk dQ at "
                  "128 and 256)",
                  softcap ? "softcap" : pr.window.local ? "sliding-window" : "varlen");
    return softcap ? run_bwd_default_masks<D, true>(pr, bf16, causal) : run_bwd_default_masks<D, false>(pr, bf16, causal);
  }
  if constexpr (D == 256) {
    if (variant == 0) return run_bwd_dispatch<D, false, false>(pr, bf16, causal);
    if (variant == 1) return run_bwd_dispatch<D, true, false>(pr, bf16, causal);
    return fail("%s",
                "head dim 256's backward is built as variants 0 (red dQ) and 1 (bulk dQ, staged in the ring) only");
  } else {
    switch (variant) {
      case 0: return run_bwd_dispatch<D, false, false>(pr, bf16, causal);
      case 1: return run_bwd_dispatch<D, true, false>(pr, bf16, causal);
      case 2: return run_bwd_dispatch<D, false, true>(pr, bf16, causal);
      case 3: return run_bwd_dispatch<D, true, true>(pr, bf16, causal);
      case 4:
        if constexpr (D == 64) return run_bwd_dispatch<D, true, false, 128>(pr, bf16, causal);
        return fail("%s", "backward variant 4 (m128, 128-row query blocks) is built for head dim 64 only");
      default:
        return fail("%s", "unknown backward variant (built: 0 red dQ, 1 bulk dQ, 2 overlap, 3 bulk dQ + overlap, 4 "
                          "m128; 5 mla_keys at head dims 192 / 128 only)");
    }
  }
}

int run_bwd_d64(const BwdProblem& pr, bool bf16, bool causal, int variant);
int run_bwd_d128(const BwdProblem& pr, bool bf16, bool causal, int variant);
int run_bwd_d256(const BwdProblem& pr, bool bf16, bool causal, int variant);
int run_bwd_d192_128(const BwdProblem& pr, bool bf16, bool causal, int variant);

}  // namespace fa3nn::hopper::host
