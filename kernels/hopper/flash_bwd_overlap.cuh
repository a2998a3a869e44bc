// Backward consumer with the next query block's score GEMMs issued ahead (kOverlap, variants 2 and 3 of
// fa3nn_hopper_bwd; benchmarks/NOTES.md, "Overlap"; variant 3 was d128's default until 2026-12-06). Included by
// flash_bwd_launch.cuh after flash_bwd.cuh (it reuses BwdConsumer and the pipeline; the kernel declares
// bwd_consumer_overlap); the default consumer is untouched.
//
// The default consumer's tensor cores idle while each step's elementwise work (mask, P^T, dS^T, packing, the dS^T
// store), its named barrier and its dQ reduction run. Here step j - 1's dQ GEMM is issued at the top of step j, next
// to step j's score GEMMs, and handed off (reduced or staged) while other work runs:
//
//   d64 (kOverlapDP): wait full j, issue S^T_j, dP^T_j, then dQ_j-1 = dS_j-1 K
//     wait S^T_j: mask, P^T_j; wait dP^T_j: dS^T_j, pack both         (dQ_j-1 still on the tensor cores)
//     (kSoftcap, not built with overlap at d64: the capped scores under dQ_j-1, P^T_j with dS^T_j)
//     wait dQ_j-1: hand it off; dS^T_j -> smem
//   d128: issue dQ_j-1, then wait full j and issue S^T_j                (the stage wait and issue under dQ_j-1)
//     wait dQ_j-1: hand it off                                          (S^T_j on the tensor cores)
//     wait S^T_j; issue dP^T_j; mask, P^T_j under dP^T_j (as the default); dS^T_j, pack, -> smem; pack P^T_j
//   both: issue dV_j += P^T_j dO_j, dK_j += dS^T_j Q_j; fence, dS barrier j; wait dK/dV_j; release stage j
//   after the last step: issue the last dQ, wait, hand it off
//
// Registers (fp32 accumulators per consumer thread; ptxas numbers in benchmarks/NOTES.md, "Overlap"): d64 peaks at
// dK 32 + dV 32 + S^T 32 + dP^T 32 + dQ 32 = 160. At d128 the d64 order needs dK 64 + dV 64 + S^T 32 + dP^T 32 + dQ
// 32 = 224 of 240 (the default already reaches R237 at 192) and spills; even S^T ahead with P^T computed under
// dQ_j-1 (dK + dV + S^T + dQ = 192, the default's count) spilled 8 B in the causal red-dQ kernels (the mask's index
// math on top). So d128 overlaps only what fits in the default's 192: the stage wait and S^T issue under dQ_j-1, and
// dQ_j-1's reductions under S^T_j; d64 also hides P^T, dS^T and both packs behind dQ_j-1.
//
// Pipeline and barriers. Each tile's step 0 issues a dQ_-1, a real GEMM whose result is discarded (why: the loop's
// comment), so every step waits with the same counts (d64). Steps are numbered across a CTA's tiles (BwdCtaTiles),
// so the dS^T / dQ buffers alternate on across tile ends. Stage j (Q, dO, lse, delta) is released after the dK/dV
// wait of step j, as before: dQ reads only dS^T and K. The dS^T buffer of step j (j & 1) was last read by dQ_j-2 (or
// by a discarded dQ_-1 at a tile's start); every consumer waited for it in step j - 1 before that step's dS barrier,
// which this step's writers passed (scripts/model_bwd_overlap.py checks this order, the group counts and the stage
// release, for one tile). Bulk dQ (variant 3): dQ_j's tile goes through the same full/empty protocol as in the
// default order, one step later in time, in the same step order, so bwd_dq_writer walks the steps as for the
// default consumer. A tile's last dQ GEMM is K's last read: after its wait the consumer arrives on kv_free.
#pragma once
#include "flash_bwd.cuh"

namespace fa3nn::hopper {

template <class Cfg>
__device__ __forceinline__ void bwd_consumer_overlap(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars,
                                                     int wg) {
  using C = BwdConsumer<Cfg>;
  using Stage = BwdStage<Cfg>;
  constexpr bool kAheadDP = Cfg::kOverlapDP;
  const BwdConsumerStart<Cfg> start(smem, wg);
  const C& c = start.c;
  const uint32_t base = start.base;
  const BwdKVDescs<Cfg>& descs = start.descs;

  float dk[C::kAccRegs], dv[C::kAccRegs];
  float s[C::kSRegs], dp[C::kSRegs], dq[C::kDQRegs];
  uint32_t pa[C::kKSteps][4], dsa[C::kKSteps][4];

  // dQ of the previous step (d128: both warpgroups' dS^T rows, d64: this one's) times K, into dq.
  auto issue_dq = [&](int prev_step) {
    bwd_issue_dq<Cfg>(dq, base + Cfg::kOffDS + (prev_step & 1) * Cfg::kDSBytes, wg, descs.k_dq);
  };
  PipelineState<Cfg::kStages> st;
  int step0 = 0;  // the CTA's steps before this tile (the dS^T / dQ buffers alternate across tiles)
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    const int n_block = t.n_block;
    BwdQueryWalk<Cfg> walk = bwd_begin_tile(c, p, bars, tiles, t, dk, dv);
    // Step i of the tile (walk's current query head and block) once S^T_i [, dP^T_i] and dQ_i-1 are committed, in
    // that order. dQ_i-1 belongs to the previous step, which under GQA may be the previous query head's last block;
    // at i = 0 it is the discarded GEMM below.
    auto finish_block = [&](int i) {
      const int step = step0 + i;
      const int m_block = walk.m_block;
      const Stage stage(smem, base, st.index);
      uint8_t* ds_smem = smem + Cfg::kOffDS + (step & 1) * Cfg::kDSBytes;
      // Pending, oldest first: d64 S^T_i, dP^T_i, dQ_i-1; d128 dQ_i-1, S^T_i (dQ_i-1's A operand, dS^T_i-1, is in
      // the other buffer).
      if constexpr (kAheadDP) {
        wgmma_wait<2>();
        fence_operands(s);
        c.masked_probs(s, p, t.seq, stage.lse_log2, m_block, n_block);
        wgmma_wait<1>();
        fence_operands(dp);
        c.ds_fragments(dp, s, stage, p.scale_log2, dsa);
        C::to_a_fragments(s, pa);
        fence_fragments(pa);
        wgmma_wait<0>();
        fence_operands(dq);
        if (i > 0) bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.prev_head(), walk.prev_m_block(), step - 1, dq);
        c.write_ds(ds_smem, dsa);
      } else {
        // dQ_i-1 handed off while S^T_i runs; from there on the default order (P^T under dP^T), and the default's
        // register peak (dK + dV + S^T + dQ = 192 during the hand-off).
        wgmma_wait<1>();
        fence_operands(dq);
        if (i > 0) bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.prev_head(), walk.prev_m_block(), step - 1, dq);
        wgmma_wait<0>();
        fence_operands(s);
        warpgroup_arrive();
        gemm_ss<64, Cfg::kHeadDim, Cfg::kBF16, Cfg::kKVPanelBytes, Cfg::kQPanelBytes>(
            dp, descs.v_rows, make_desc_kmajor_sw128(stage.do_smem));
        wgmma_commit();
        c.masked_probs(s, p, t.seq, stage.lse_log2, m_block, n_block);
        wgmma_wait<0>();
        fence_operands(dp);
        c.ds_fragments(dp, s, stage, p.scale_log2, dsa);
        c.write_ds(ds_smem, dsa);
        C::to_a_fragments(s, pa);
      }
      bwd_issue_dkdv<Cfg>(dk, dv, pa, dsa, stage);
      bwd_sync_ds<Cfg>(wg);  // before dQ_i (next step) reads dS^T_i
      wgmma_wait<0>();
      fence_fragments(pa);
      fence_fragments(dsa);
      fence_operands(dk);
      fence_operands(dv);
      // Stage i is no longer read (Q, dO by the finished GEMMs; lse, delta before the barrier above).
      if (c.leader) bars.qdo.consumer_release(st);
      st.advance();
    };
    // Step i's score GEMMs, then dQ_i-1. No wgmma sits under a branch and none is in flight across the loop's back
    // edge; both cost the whole kernel (nvcc 13.0): with dQ_i issued at the end of step i and waited in step i + 1,
    // ptxas serialized every wgmma (C7515, all 16 kernels); with `if (i > 0)` around dQ_i-1's wgmmas, or with the
    // first step peeled, it injected a warpgroup.arrive (C7519, the 8 d64 kernels). So each tile's step 0 issues a
    // dQ too: it reads the other dS^T buffer (its result is never handed off, and the next dQ starts with scale-d 0),
    // one 64-query GEMM per tile. Every key block has at least one query block (the last query row sees every key:
    // first_m_block), so the tile's final dQ after the loop needs no branch either.
    int i = 0;
    for (; i < walk.total; ++i, walk.advance()) {
      if constexpr (kAheadDP) {
        wait_in_loop(bars.qdo.full[st.index], st.phase);
        if (i == 0) bwd_trace(c.leader, wg, tiles.iter, kTraceFirstStage);
        bwd_issue_scores<Cfg, true>(s, dp, descs.k_rows, descs.v_rows, Stage(smem, base, st.index));
        issue_dq(step0 + i - 1);
        wgmma_commit();
      } else {
        // d128: dQ_i-1 first, so the stage wait and S^T_i's issue run under it, and its hand-off under S^T_i.
        issue_dq(step0 + i - 1);
        wgmma_commit();
        wait_in_loop(bars.qdo.full[st.index], st.phase);
        if (i == 0) bwd_trace(c.leader, wg, tiles.iter, kTraceFirstStage);
        bwd_issue_scores<Cfg, false>(s, dp, descs.k_rows, descs.v_rows, Stage(smem, base, st.index));
      }
      finish_block(i);
    }
    // The walk stands one past the tile's last step (group's last head, last block): that step's dQ, K's last read.
    bwd_trace(c.leader, wg, tiles.iter, kTraceLoopEnd);
    issue_dq(step0 + i - 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(dq);
    bwd_free_kv<Cfg>(c, bars, tiles);
    bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.prev_head(), walk.prev_m_block(), step0 + i - 1, dq);
    bwd_end_tile(c, p, tiles, t, dk, dv, c.col_base(), c.col_base());
    step0 += walk.total;
  }
}

}  // namespace fa3nn::hopper
