// The consumer of the Hopper backward at multi-head latent attention's head dims (BwdConfig::kPanelSplit: Q and K
// 192 = 128 + 64 rotary, V, O and dO 128; the producer, tiles, query walk, masks, row statistics, dQ writer and dK /
// dV stores are flash_bwd.cuh's). Since 2026-12-06 it runs varlen calls (and variant bulk_dq); dense calls take the
// 128-key blocks of flash_bwd_mla_keys.cuh, 1.10-1.27x this kernel (H100, s43d).
//
// The head-dim-256 kernel's shape (flash_bwd_cols.cuh): 64-key blocks, each warpgroup S^T / dP^T for half the
// queries over all 64 keys, P^T and dS^T through shared memory. Its even column split does not carry over: dK's and
// dQ's 192 columns would be 96 per warpgroup, and wgmma reads an N-major (MN-major) SW128 operand in whole 64-column
// panels (the canonical layout repeats the 64-element swizzle atom along N). So the 64-column panels are dealt
// unevenly, four panel GEMMs (64 keys or queries x 64 columns x 64) per warpgroup and step:
//   role 0 (warpgroup 1): dK panels 0-1 (N = 128), dV panel 0 (N = 64), dQ panel 0 (N = 64)
//   role 1 (warpgroup 2): dK panel 2 (N = 64),     dV panel 1 (N = 64), dQ panels 1-2 (N = 128)
// Accumulators per consumer thread: dK 64 / 32 + dV 32 + dQ 32 / 64 + S^T 16 + dP^T 16 (160 at most), and V's A
// fragments for dP^T (32, loaded once per tile; mla_issue_dp): ptxas R223 of 240, 0 spills, nvcc 13.0. dQ (64 x 192
// fp32, 48 KB) is staged in one buffer (BwdConfig::kDQBuffers; two Q / dO stages leave no room for a second) and
// added by the dQ writer's TMA reduce-adds (bulk dQ; bwd_dq_writer).
// Where a step's time goes (benchmarks/NOTES.md thirty-ninth session): 2.1 us per 64 x 64 step against d256's 3.2
// (H100, bwd_trace.py), the same rate per FLOP; without dQ (GEMM, staging and reduce-adds, a timing-only build) a
// step ran 1.4-1.6x faster, and Nsight Compute (H200, 8k) puts L2 at 82% of its peak: each 64-key step loads Q and
// dO (40 KB) and reduce-adds dQ (48 KB), twice d128's L2 bytes per FLOP. But L2 is busy, not the limit: a 2-CTA
// cluster of key-block pairs that halved both (Q / dO multicast, each CTA reduce-adding half of dQ's panels;
// commit b56c73c, timing builds without the pair's dQ exchange) ran 0.98-1.07x this kernel, and with the exchange
// that makes dQ right (st.async per value, or one DSMEM bulk copy per step) 0.49-0.60x, its consumers waiting on
// the pair's round trip every step (H100 / H200, NOTES "fortieth session"): not kept. V in registers (the SS form
// read V, 16 KB, in both warpgroups every step) measured 1.01-1.03x, the dQ staging without bank conflicts
// (store_dq_slabs) 1.02-1.07x (H200, s39c / s39e).
// Measured before those (H100, bench.py, thirty-eighth session): 1.13-1.38x cuDNN non-causal, 0.79-1.00x causal
// (cuDNN's causal MLA backward runs 1.6-1.7x its non-causal rate; ours the same rate either way), 1.37-1.89x the
// Triton backward; one CTA per tile (persistent 0.83-0.93x, flash_bwd_launch.cuh use_persistent_bwd). Issuing the
// next step's scores behind this step's dK / dV / dQ GEMMs (the d128 kernel's overlap) measured 0.87-0.98x, and
// issuing dQ first with its staging under dK / dV 0.99-1.01x: neither kept.
#pragma once

#include "flash_bwd_cols.cuh"  // bwd_cols_probs (and flash_bwd.cuh)

namespace fa3nn::hopper {

// One role's 64-column panels: dK's first and count, dV's, dQ's.
template <int kRole>
struct MlaPanels {
  static constexpr int kDK0 = kRole == 0 ? 0 : 2, kDKPanels = kRole == 0 ? 2 : 1;
  static constexpr int kDV0 = kRole, kDVPanels = 1;
  static constexpr int kDQ0 = kRole == 0 ? 0 : 1, kDQPanels = kRole == 0 ? 1 : 2;
  static constexpr int kDKRegs = 32 * kDKPanels, kDVRegs = 32 * kDVPanels, kDQRegs = 32 * kDQPanels;
};

// dP^T = V dO^T over V's head dim (not committed): A = V from registers (va, this tile's), B = the warpgroup's
// queries of dO read K-major from the stage (64-column panels kQPanelBytes apart). V in registers spares the
// shared-memory reads of V that the SS form repeats in both warpgroups every step.
template <class Cfg>
__device__ __forceinline__ void mla_issue_dp(float (&dp)[BwdConsumer<Cfg>::kSRegs],
                                             const uint32_t (&va)[Cfg::kHeadDimV / 16][4], uint64_t desc_do) {
#pragma unroll
  for (int k = 0; k < Cfg::kHeadDimV / 16; ++k)
    WgmmaRSK<BwdConsumer<Cfg>::kSQueries, Cfg::kBF16>::mma(
        dp, va[k], desc_advance(desc_do, (k / 4) * Cfg::kQPanelBytes + (k % 4) * 32), k > 0 ? 1 : 0);
}

template <class Cfg, int kRole>
__device__ __forceinline__ void bwd_consumer_mla(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars) {
  using C = BwdConsumer<Cfg>;
  using R = MlaPanels<kRole>;
  static_assert(Cfg::kPanelSplit && Cfg::kDQBulk && !Cfg::kDQInRing && Cfg::kDQBuffers == 1 && !Cfg::kOverlap &&
                    Cfg::kBlockM == kPanelCols,
                "multi-head latent attention's backward (BwdConfig::kPanelSplit) is built with bulk dQ only");
  const BwdConsumerStart<Cfg> start(smem, kRole);
  const C& c = start.c;
  const uint32_t base = start.base;
  const BwdKVDescs<Cfg>& descs = start.descs;
  // dQ = dS K over this role's panels of K, read N-major, all 64 keys.
  const uint64_t desc_k_dq = make_desc_mnmajor_sw128(base + R::kDQ0 * Cfg::kKVPanelBytes, Cfg::kKVPanelBytes);

  float dk[R::kDKRegs], dv[R::kDVRegs], dq[R::kDQRegs];
  float s[C::kSRegs], dp[C::kSRegs];
  uint32_t pa[C::kKSteps][4], dsa[C::kKSteps][4];
  uint32_t va[Cfg::kHeadDimV / 16][4];  // V's A fragments (all 64 keys), loaded once per tile

  PipelineState<Cfg::kStages> st;
  int step0 = 0;  // the CTA's steps before this tile (the P^T / dS^T buffers alternate across tiles)
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    const int n_block = t.n_block;
    BwdQueryWalk<Cfg> walk = bwd_begin_tile(c, p, bars, tiles, t, dk, dv);
    ld_shared_a_fragments_sw128<Cfg::kHeadDimV>(va, base + Cfg::kOffV, Cfg::kKVPanelBytes, c.tid);
    for (int i = 0; i < walk.total; ++i, walk.advance()) {
      const int step = step0 + i;
      const int m_block = walk.m_block;
      wait_in_loop(bars.qdo.full[st.index], st.phase);
      if (i == 0) bwd_trace(c.leader, kRole, tiles.iter, kTraceFirstStage);
      const BwdStage<Cfg> stage(smem, base, st.index);

      const uint32_t query_rows = c.query_base() * kPanelRowBytes;
      const BwdColsBuffers buf = bwd_cols_probs(c, p, t.seq, stage, smem, step, m_block, n_block, s, dp, pa, dsa, [&] {
        warpgroup_arrive();
        gemm_ss<C::kSQueries, Cfg::kHeadDim, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
            s, descs.k_rows, make_desc_kmajor_sw128(stage.q_smem + query_rows));
        wgmma_commit();
        mla_issue_dp<Cfg>(dp, va, make_desc_kmajor_sw128(stage.do_smem + query_rows));
        wgmma_commit();
      });

      // dV += P^T dO and dK += dS^T Q over this role's panels (A: all 64 queries, K-major; B: N-major), then
      // dQ = dS K; one commit group.
      const uint64_t desc_p = make_desc_kmajor_sw128(smem_addr(buf.p));
      const uint64_t desc_ds = make_desc_kmajor_sw128(smem_addr(buf.ds));
      const uint64_t desc_do = make_desc_mnmajor_sw128(stage.do_smem + R::kDV0 * Cfg::kQPanelBytes, Cfg::kQPanelBytes);
      const uint64_t desc_q = make_desc_mnmajor_sw128(stage.q_smem + R::kDK0 * Cfg::kQPanelBytes, Cfg::kQPanelBytes);
      const uint64_t desc_ds_mn = make_desc_mnmajor_sw128(smem_addr(buf.ds), Cfg::kDSPanelBytes);
      warpgroup_arrive();
#pragma unroll
      for (int k = 0; k < Cfg::kBlockM / 16; ++k)
        WgmmaSSBN<64 * R::kDVPanels, Cfg::kBF16>::mma(dv, desc_advance(desc_p, k * 32),
                                                      desc_advance(desc_do, k * 16 * kPanelRowBytes), 1);
#pragma unroll
      for (int k = 0; k < Cfg::kBlockM / 16; ++k)
        WgmmaSSBN<64 * R::kDKPanels, Cfg::kBF16>::mma(dk, desc_advance(desc_ds, k * 32),
                                                      desc_advance(desc_q, k * 16 * kPanelRowBytes), 1);
#pragma unroll
      for (int k = 0; k < Cfg::kBlockN / 16; ++k)
        WgmmaSSMN<64 * R::kDQPanels, Cfg::kBF16>::mma(dq, desc_advance(desc_ds_mn, k * 16 * kPanelRowBytes),
                                                      desc_advance(desc_k_dq, k * 16 * kPanelRowBytes), k > 0 ? 1 : 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(dq);
      fence_operands(dk);
      fence_operands(dv);
      // Q, dO, lse and delta of this stage are no longer read (the statistics before the barrier above; the leader's
      // wait covers the warpgroup's wgmmas).
      if (c.leader) bars.qdo.consumer_release(st);
      st.advance();
      if (i + 1 == walk.total) {
        bwd_trace(c.leader, kRole, tiles.iter, kTraceLoopEnd);
        bwd_free_kv<Cfg>(c, bars, tiles);
      }
      // dQ into the staging tile (one buffer: the dQ writer's reduce-adds of the previous step have read it first),
      // this role's 32-column fp32 panels 2 kDQ0 ..
      if (step >= 1) NamedBarrier::sync(Cfg::kDQEmptyBarrier, Cfg::kDQBarrierThreads);
      const uint32_t tile = smem_addr(smem + Cfg::kOffDQ) + 2 * R::kDQ0 * Cfg::kDQPanelBytes;
      c.template store_dq_slabs<true>(dq, [&](int panel) { return tile + panel * Cfg::kDQPanelBytes; });
      fence_proxy_async_smem();
      NamedBarrier::arrive(Cfg::kDQFullBarrier, Cfg::kDQBarrierThreads);
    }
    bwd_end_tile(c, p, tiles, t, dk, dv, R::kDK0 * kPanelCols, R::kDV0 * kPanelCols);
    step0 += walk.total;
  }
}

}  // namespace fa3nn::hopper
