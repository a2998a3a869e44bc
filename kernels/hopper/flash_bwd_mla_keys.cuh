// The consumer of the Hopper backward at multi-head latent attention's head dims (q / k 192, v 128) with 128-key
// blocks (BwdConfig::kMlaKeySplit, variant mla_keys): the d128 kernel's key split. Warpgroup c owns keys [64c, 64c +
// 64) of the block, and their dK (64 x 192) and dV (64 x 128) in registers across the tile: 96 + 64 = 160 per thread.
// Why: the 64-key column split (flash_bwd_mla.cuh) loads Q / dO and reduce-adds dQ once per 64 keys; cuDNN's MLA
// backward, 64 x 64 blocks per warpgroup too, does both once per 128 keys (half the L2 reads and reductions under
// Nsight Compute, causal 8k, H100) and ran 1.23x faster with L2 at 84% of its peak against our 95% (benchmarks/
// NOTES.md, forty-third session).
// Registers: beside dK / dV, S^T and dP^T of all 64 queries (64 more) do not fit (224 spilled 1.2 KB and serialized
// the wgmmas, nvcc 13.0), so each step takes its queries in two halves of 32 (mla_keys_half: S^T / dP^T m64n32, 32
// registers), dS^T goes straight to shared memory (dK's A operand from there, SS), P^T into dV's RS GEMM per half,
// and dQ comes after, one 64-column panel (32 registers) at a time: warpgroup 0 panels 0-1, warpgroup 1 panel 2, each
// over all 128 keys (both warpgroups' dS^T), staged into the one 64 x 192 dQ tile for the dQ writer's reduce-adds.
// One dS^T buffer (BwdConfig::kDSBuffers: shared memory K 48 + V 32 + two Q / dO stages 80 + dS^T 16 + dQ 48 KB): a
// warpgroup writes step s + 1's only after both have read step s's in their dQ GEMMs. Warpgroup 0 (two panels) passes
// the dQ empty barrier (both consumers and the writer) after warpgroup 1's only dQ GEMM and before its own next
// writes (the CTA's first step too: the dQ writer arrives once ahead for it, bwd_dq_writer); warpgroup 1
// waits for warpgroup 0's second dQ GEMM on kDSFreeBarrier (one arrive / sync pair per step within a tile; across
// tiles the K/V barrier orders them: the next tile's K/V loads after both consumers freed this one's).
#pragma once

#include "flash_bwd.cuh"

namespace fa3nn::hopper {

// One role's 64-column dQ panels: warpgroup 0 panels 0-1, warpgroup 1 panel 2.
template <int kRole>
struct MlaKeysDQ {
  static constexpr int kPanel0 = kRole == 0 ? 0 : 2, kPanels = kRole == 0 ? 2 : 1;
};

// One half of the step's queries (32) over the warpgroup's 64 keys, through the column split's consumer view
// (BwdConsumer of the 64-key MLA configuration: 32 queries, query_base = 32 x its `wg`, which is the half here; its
// 64-key blocks number this warpgroup's keys as block 2 n_block + role, so masks and key indices come out right):
// S^T and dP^T (m64n32, two groups), P^T and dS^T; dS^T into this warpgroup's key rows of the shared buffer (ds_rows,
// after `before_write`); dV += P^T dO over the half's queries issued from `frag` (one group, not waited for). kPrev:
// `prev` holds the fragments of a group still in flight (the first half's dV), kept live up to this half's first
// wait, which retires that group (a fragment register reused before the wait would feed the running wgmma a new
// value).
template <class Cfg, int kRole, bool kPrev, class H, class BeforeWrite>
__device__ __forceinline__ void mla_keys_half(const H& view, const BwdParams& p, const BwdTile& t, uint32_t base,
                                              const BwdStage<Cfg>& stage, const BwdKVDescs<Cfg>& descs,
                                              uint8_t* ds_rows, int m_block,
                                              float (&dv)[Cfg::kHeadDimV / 2], uint32_t (&frag)[H::kKSteps][4],
                                              uint32_t (&prev)[H::kKSteps][4], BeforeWrite before_write) {
  float s[H::kSRegs], dp[H::kSRegs];
  const uint32_t query_rows = view.query_base() * kPanelRowBytes;
  warpgroup_arrive();
  gemm_ss<H::kSQueries, Cfg::kHeadDim, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
      s, descs.k_rows, make_desc_kmajor_sw128(stage.q_smem + query_rows));
  wgmma_commit();
  gemm_ss<H::kSQueries, Cfg::kHeadDimV, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
      dp, descs.v_rows, make_desc_kmajor_sw128(stage.do_smem + query_rows));
  wgmma_commit();
  wgmma_wait<1>();
  if constexpr (kPrev) fence_fragments(prev);
  fence_operands(s);
  // The masks' lengths and key block (this warpgroup's 64 keys as the view's block 2 n_block + role): published
  // ones (varlen) read here, live for the masks only (BwdPublishedTiles; base: smem_addr of the aligned shared
  // memory); dense ones the tile's.
  const BwdTile at = Cfg::kPublishTiles ? BwdPublishedTiles<Cfg>::tile_in_step(base) : t;
  view.masked_probs(s, p, at.seq, stage.lse_log2, m_block, 2 * at.n_block + kRole);
  wgmma_wait<0>();
  fence_operands(dp);
  view.dscores(dp, s, stage.delta);
  H::to_a_fragments(dp, frag);
  before_write();
  view.write_ds(ds_rows, frag);
  H::to_a_fragments(s, frag);
  fence_fragments(frag);
  warpgroup_arrive();
  gemm_rs<H::kSQueries, Cfg::kHeadDimV, Cfg::kBF16>(
      dv, frag, make_desc_mnmajor_sw128(stage.do_smem + query_rows, Cfg::kQPanelBytes));
  wgmma_commit();
}

template <class Cfg, int kRole>
__device__ __forceinline__ void bwd_consumer_mla_keys(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars) {
  using C = BwdConsumer<Cfg>;
  using D = MlaKeysDQ<kRole>;
  // The column split's configuration, as the view of one half of the queries (mla_keys_half).
  using HalfCfg = BwdConfig<Cfg::kHeadDim, Cfg::kStages, Cfg::kBF16, Cfg::kCausal, true, false, 64, Cfg::kVarlen,
                            false, false, Cfg::kHeadDimV>;
  using H = BwdConsumer<HalfCfg>;
  static_assert(Cfg::kMlaKeySplit && !Cfg::kColSplit && Cfg::kBlockN == 128 && Cfg::kBlockM == 64 &&
                    Cfg::kDSBuffers == 1 && Cfg::kDQBuffers == 1 && Cfg::kDQTiles == 1 && HalfCfg::kColSplit &&
                    HalfCfg::kBlockN == 64 && H::kSQueries == 32,
                "the MLA key split (BwdConfig::kMlaKeySplit)");
  const BwdConsumerStart<Cfg> start(smem, kRole);
  const C& c = start.c;
  const uint32_t base = start.base;
  const BwdKVDescs<Cfg>& descs = start.descs;
  uint8_t* ds_rows = smem + Cfg::kOffDS + kRole * 64 * kPanelRowBytes;  // this warpgroup's key rows of dS^T

  float dk[Cfg::kHeadDim / 2], dv[Cfg::kHeadDimV / 2], dq[kPanelCols / 2];
  uint32_t frag[2][H::kKSteps][4];  // P^T's A fragments of the two halves (dV's RS GEMMs)

  PipelineState<Cfg::kStages> st;
  // Varlen walks the tiles its producer publishes (BwdConfig::kPublishTiles: decoding them here spilled).
  using Tiles = std::conditional_t<Cfg::kPublishTiles, BwdPublishedTiles<Cfg>, BwdCtaTiles<Cfg>>;
  for (Tiles tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile_at<Cfg>(p, tiles);
    BwdQueryWalk<Cfg> walk = bwd_begin_tile(c, p, bars, tiles, t, dk, dv);
    for (int i = 0; i < walk.total; ++i, walk.advance()) {
      const int m_block = walk.m_block;
      wait_in_loop(bars.qdo.full[st.index], st.phase);
      if (i == 0) bwd_trace(c.leader, kRole, tiles.iter, kTraceFirstStage);
      const BwdStage<Cfg> stage(smem, base, st.index);

      // dS^T into the one buffer once both warpgroups' dQ GEMMs of the previous step have read it (file comment).
      mla_keys_half<Cfg, kRole, false>(H{0, c.tid, c.leader}, p, t, base, stage, descs, ds_rows, m_block, dv,
                                frag[0], frag[1], [&] {
                                  if (kRole == 1 && i >= 1)
                                    NamedBarrier::sync(Cfg::kDSFreeBarrier, C::kDSBarrierThreads);
                                });
      mla_keys_half<Cfg, kRole, true>(H{1, c.tid, c.leader}, p, t, base, stage, descs, ds_rows, m_block, dv,
                               frag[1], frag[0], [] {});
      bwd_sync_ds<Cfg>(kRole);  // both warpgroups' dS^T rows written (dK reads this one's, dQ all 128 keys)
      // dK += dS^T Q: A = this warpgroup's key rows of dS^T (K-major, k-steps of 16 queries), B = Q read N-major.
      // (Descriptors made where they are used: held across the step loop, the causal kernels spilled 8 B.)
      const uint64_t desc_q = make_desc_mnmajor_sw128(stage.q_smem, Cfg::kQPanelBytes);
      const uint64_t desc_ds_rows = make_desc_kmajor_sw128(base + Cfg::kOffDS + kRole * 64 * kPanelRowBytes);
      warpgroup_arrive();
#pragma unroll
      for (int k = 0; k < Cfg::kBlockM / 16; ++k)
        WgmmaSSBN<Cfg::kHeadDim, Cfg::kBF16>::mma(dk, desc_advance(desc_ds_rows, k * 32),
                                                  desc_advance(desc_q, k * 16 * kPanelRowBytes), 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_fragments(frag[1]);
      fence_operands(dk);
      fence_operands(dv);
      // Q, dO, lse and delta of this stage are no longer read (the leader's wait covers the warpgroup's wgmmas).
      if (c.leader) bars.qdo.consumer_release(st);
      st.advance();

      // dQ = dS K: A = dS^T (both warpgroups' 128 key rows) read M-major, B = K's panels of this role read N-major.
      const uint64_t desc_ds = make_desc_mnmajor_sw128(base + Cfg::kOffDS, Cfg::kDSPanelBytes);
#pragma unroll
      for (int panel = 0; panel < D::kPanels; ++panel) {
        const uint64_t desc_k_dq =
            make_desc_mnmajor_sw128(base + (D::kPanel0 + panel) * Cfg::kKVPanelBytes, Cfg::kKVPanelBytes);
        warpgroup_arrive();
#pragma unroll
        for (int k = 0; k < Cfg::kBlockN / 16; ++k)
          WgmmaSSMN<kPanelCols, Cfg::kBF16>::mma(dq, desc_advance(desc_ds, k * 16 * kPanelRowBytes),
                                                 desc_advance(desc_k_dq, k * 16 * kPanelRowBytes), k > 0 ? 1 : 0);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(dq);
        // The writer's reduce-adds of the previous step have read the dQ tile (at the CTA's first step, the writer's
        // arrival ahead). An arrival ahead rather than a first-step test: the test kept the tile count live in the
        // step loop, which the varlen kernels spilled (8-16 B, nvcc 13.0).
        if (panel == 0) NamedBarrier::sync(Cfg::kDQEmptyBarrier, Cfg::kDQBarrierThreads);
        if (panel + 1 == D::kPanels) {
          if (i + 1 == walk.total) {  // K's last read of the tile done: the next tile's K/V may load
            bwd_trace(c.leader, kRole, tiles.iter, kTraceLoopEnd);
            bwd_free_kv<Cfg>(c, bars, tiles);
          } else if (kRole == 0) {
            NamedBarrier::arrive(Cfg::kDSFreeBarrier, C::kDSBarrierThreads);  // dS^T read: warpgroup 1 may write
          }
        }
        const uint32_t panel_tile = base + Cfg::kOffDQ + 2 * (D::kPanel0 + panel) * Cfg::kDQPanelBytes;
        c.template store_dq_slabs<true>(dq, [&](int slab) { return panel_tile + slab * Cfg::kDQPanelBytes; });
      }
      fence_proxy_async_smem();
      NamedBarrier::arrive(Cfg::kDQFullBarrier, Cfg::kDQBarrierThreads);
    }
    bwd_end_tile(c, p, tiles, t, dk, dv, 0, 0);
  }
}

}  // namespace fa3nn::hopper
