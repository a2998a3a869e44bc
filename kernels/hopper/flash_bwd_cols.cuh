// The head-dim-256 consumer of the Hopper backward (BwdConfig::kColSplit; the producer, tiles, query walk, masks,
// row statistics, dQ reductions and dK / dV stores are flash_bwd.cuh's).
//
// At d256 one warpgroup cannot hold dK and dV for 64 keys (2 x 128 fp32 registers per thread), so a CTA takes a block
// of 64 keys and its two consumer warpgroups split the head dim (FlashAttention-3's d256 backward tile, 64 x 64 with
// two MMA warpgroups, has the same shape). Per query block of 64 rows, warpgroup c:
//   S^T_c  = K Q_c^T           SS, N = 32: all 64 keys x queries [32c, 32c + 32)
//   dP^T_c = V dO_c^T          SS, N = 32
//   P^T_c, dS^T_c as flash_bwd.cuh's consumer, then both written to shared memory (SW128, keys x 64 queries),
//   one 256-thread barrier, and with all 64 queries of P^T and dS^T from shared memory:
//   dV_c += P^T dO[:, 128c..]   SS, A K-major, B N-major (trans-b), N = 128
//   dK_c += dS^T Q[:, 128c..]   SS, the same
//   dQ_c  = dS K[:, 128c..]     SS, A M-major, B N-major (flash_bwd.cuh bwd_issue_dq), N = 128
// all three in one commit group (no register operands), then dQ_c into dq_accum: staged in the warpgroup's own
// column halves of the step's Q / dO stage and added by the dQ writer's TMA reduce-adds (bulk dQ, BwdConfig::
// kDQInRing, the default), or by red.global.add.v2.f32 from every thread (red dQ).
// Registers per consumer thread: dK 64 + dV 64 + dQ 64 + S^T 16 + dP^T 16 (S^T / dP^T dead before the dQ GEMM).
//
// The P^T / dS^T buffers alternate per step: the buffer written at step s was last read by step s - 2's wgmmas,
// which each warpgroup waited for before it wrote step s - 1's and arrived at step s - 1's barrier.
//
// Bulk dQ, measured (H200, timing-only builds, benchmarks/NOTES.md "thirtieth session", s30b / s30e): with red dQ
// the 32 red.global.add.v2.f32 per thread and step took half the backward (without them 628 against 294 TFLOP/s at
// 8k); with bulk dQ (1.12-1.32x red dQ) its staging stores still take 24-39%, the reduce-adds' L2 side 15-28%, the
// S^T / dP^T GEMMs 2-23%, the P^T / dS^T stores with their barrier 3-23%. The ring stage holds the staged dQ
// until the writer's reduce-adds have read it, then the writer (one arrival) frees it for the producer; the full
// barrier alternates with the step's parity (kDQFullBarrier + (step & 1)) because the consumers can arrive for step
// s + 1 before the writer has synced step s, never for s + 2 (its stage is s's, freed only after that sync).
#pragma once

#include "flash_bwd.cuh"

namespace fa3nn::hopper {

// dV += P^T dO and dK += dS^T Q for this warpgroup's kAccCols head-dim columns (not committed): A = P^T / dS^T at
// p_smem / ds_smem (keys x kBlockM queries, K-major, one SW128 panel), B = dO / Q of the stage read N-major from the
// warpgroup's first column panel, k-steps of 16 queries.
template <class Cfg>
__device__ __forceinline__ void bwd_issue_dkdv_ss(float (&dk)[BwdConsumer<Cfg>::kAccRegs],
                                                  float (&dv)[BwdConsumer<Cfg>::kAccRegs], uint32_t p_smem,
                                                  uint32_t ds_smem, const BwdStage<Cfg>& stage, int col_base) {
  static_assert(!Cfg::kPanelSplit, "the even column split (flash_bwd_mla.cuh deals the MLA panels itself)");
  constexpr int N = BwdConsumer<Cfg>::kAccCols;
  static_assert(Cfg::kBlockM == kPanelCols, "P^T / dS^T as one K-major panel of 64 queries");
  const uint32_t cols = (col_base / kPanelCols) * Cfg::kQPanelBytes;
  const uint64_t desc_do = make_desc_mnmajor_sw128(stage.do_smem + cols, Cfg::kQPanelBytes);
  const uint64_t desc_q = make_desc_mnmajor_sw128(stage.q_smem + cols, Cfg::kQPanelBytes);
  const uint64_t desc_p = make_desc_kmajor_sw128(p_smem), desc_ds = make_desc_kmajor_sw128(ds_smem);
  warpgroup_arrive();
#pragma unroll
  for (int k = 0; k < Cfg::kBlockM / 16; ++k)
    WgmmaSSBN<N, Cfg::kBF16>::mma(dv, desc_advance(desc_p, k * 32), desc_advance(desc_do, k * 16 * kPanelRowBytes), 1);
#pragma unroll
  for (int k = 0; k < Cfg::kBlockM / 16; ++k)
    WgmmaSSBN<N, Cfg::kBF16>::mma(dk, desc_advance(desc_ds, k * 32), desc_advance(desc_q, k * 16 * kPanelRowBytes), 1);
}

// Shared-memory offset of panel j (32 fp32 dQ columns: 128 wg + 32 j ..) of warpgroup wg's dQ staged in ring stage
// `index`: Q's column panels 2 wg and 2 wg + 1, then dO's (8 KB each, the size of a 64 x 32 fp32 panel).
template <class Cfg>
__device__ __forceinline__ uint32_t ring_dq_panel(uint32_t index, int wg, int j) {
  static_assert(Cfg::kQPanelBytes == Cfg::kDQPanelBytes, "a 64 x 64 bf16 panel holds a 64 x 32 fp32 one");
  return (j < 2 ? Cfg::kOffQ + index * Cfg::kQBytes : Cfg::kOffDO + index * Cfg::kDOBytes) +
         (2 * wg + (j & 1)) * Cfg::kQPanelBytes;
}

// The ring staging keeps every lane on slab j (store_dq_slabs<false>): with the conflict-free order it ran 0.88-0.97x
// (H200, s39e). FA3NN_BWD_RING_SPREAD, a measurement build only (hopper_build --define), takes that order, to
// profile why (scripts/sessions/gpu_session_s40a.sh).
#ifdef FA3NN_BWD_RING_SPREAD
constexpr bool kRingSpread = true;
#else
constexpr bool kRingSpread = false;
#endif

template <class Cfg>
__device__ __forceinline__ void BwdConsumer<Cfg>::stage_dq_ring(uint32_t base, uint32_t index,
                                                                const float (&dq)[kDQRegs]) const {
  store_dq_slabs<kRingSpread>(dq, [&](int panel) { return base + ring_dq_panel<Cfg>(index, wg, panel); });
}

// kDQInRing's dQ writer (warp 1 of the producer warpgroup): per step, once both consumers have staged their dQ in
// the step's ring stage (full barrier of the step's parity), one lane adds the 8 panels into dq_accum with TMA
// reduce-adds, waits until they have read shared memory, and frees the stage for the producer.
template <class Cfg>
__device__ __forceinline__ void bwd_dq_writer_ring(const CUtensorMap* tma_dq, const BwdParams& p, uint8_t* smem,
                                                   typename Cfg::Barriers& bars) {
  const bool issuer = elect_one();
  if (issuer) tma_prefetch_descriptor(tma_dq);
  PipelineState<Cfg::kStages> st;
  int step = 0;  // across tiles
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    BwdQueryWalk<Cfg> walk(p, t.seq, t.n_block, t.kv_head);
    for (int i = 0; i < walk.total; ++i, ++step, walk.advance()) {
      NamedBarrier::sync(Cfg::kDQFullBarrier + (step & 1), Cfg::kDQBarrierThreads);
      if (issuer) {
        const int row = t.seq.ws_row0 + walk.m_block * Cfg::kBlockM;
#pragma unroll
        for (int wg = 0; wg < Cfg::kConsumers; ++wg)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            tma_reduce_add_4d(tma_dq, smem + ring_dq_panel<Cfg>(st.index, wg, j), (4 * wg + j) * Cfg::kDQPanelCols,
                              row, walk.head, t.seq.tma_batch);
        tma_store_commit();
        tma_store_wait_read<0>();
        bars.qdo.consumer_release(st);
      }
      __syncwarp();
      st.advance();
    }
  }
  if (issuer) tma_store_wait<0>();
}

// The shared-memory buffers of one column-split step: P^T and dS^T (keys x 64 queries), alternating per step.
struct BwdColsBuffers {
  uint8_t* p;
  uint8_t* ds;
};

// A column-split step's first half (this file's consumer and flash_bwd_mla.cuh's): S^T and dP^T for this
// warpgroup's queries over all 64 keys, issued by issue_scores() as two commit groups (S^T first), P^T and dS^T
// written to the step's buffers (step & 1), then the barrier after which both warpgroups' queries of them are
// written and visible to the async proxy.
template <class Cfg, class IssueScores>
__device__ __forceinline__ BwdColsBuffers bwd_cols_probs(const BwdConsumer<Cfg>& c, const BwdParams& p,
                                                         const BwdSeq& seq, const BwdStage<Cfg>& stage,
                                                         uint8_t* smem, int step, int m_block, int n_block,
                                                         float (&s)[BwdConsumer<Cfg>::kSRegs],
                                                         float (&dp)[BwdConsumer<Cfg>::kSRegs],
                                                         uint32_t (&pa)[BwdConsumer<Cfg>::kKSteps][4],
                                                         uint32_t (&dsa)[BwdConsumer<Cfg>::kKSteps][4],
                                                         IssueScores issue_scores) {
  issue_scores();
  wgmma_wait<1>();
  fence_operands(s);
  c.masked_probs(s, p, seq, stage.lse_log2, m_block, n_block);
  wgmma_wait<0>();
  fence_operands(dp);
  c.ds_fragments(dp, s, stage, p.scale_log2, dsa);
  BwdConsumer<Cfg>::to_a_fragments(s, pa);
  const BwdColsBuffers buffers{smem + Cfg::kOffP + (step & 1) * Cfg::kDSBytes,
                               smem + Cfg::kOffDS + (step & 1) * Cfg::kDSBytes};
  c.write_ds(buffers.ds, dsa);
  c.write_ds(buffers.p, pa);
  bwd_sync_ds<Cfg>(c.wg);
  return buffers;
}

template <class Cfg>
__device__ __forceinline__ void bwd_consumer_cols(const BwdParams& p, uint8_t* smem, typename Cfg::Barriers& bars,
                                                  int wg) {
  using C = BwdConsumer<Cfg>;
  static_assert(Cfg::kColSplit && !Cfg::kOverlap && (Cfg::kDQInRing || !Cfg::kDQBulk),
                "the head-dim split (BwdConfig)");
  const BwdConsumerStart<Cfg> start(smem, wg);
  const C& c = start.c;
  const uint32_t base = start.base;
  const BwdKVDescs<Cfg>& descs = start.descs;

  float dk[C::kAccRegs], dv[C::kAccRegs];
  float s[C::kSRegs], dp[C::kSRegs], dq[C::kDQRegs];
  uint32_t pa[C::kKSteps][4], dsa[C::kKSteps][4];

  PipelineState<Cfg::kStages> st;
  int step0 = 0;  // the CTA's steps before this tile (the P^T / dS^T buffers alternate across tiles)
  for (BwdCtaTiles<Cfg> tiles(p); tiles.valid(p); tiles.advance(p)) {
    const BwdTile t = bwd_tile<Cfg>(p, tiles.tile);
    const int n_block = t.n_block;
    BwdQueryWalk<Cfg> walk = bwd_begin_tile(c, p, bars, tiles, t, dk, dv);
    for (int i = 0; i < walk.total; ++i, walk.advance()) {
      const int step = step0 + i;
      const int m_block = walk.m_block;
      wait_in_loop(bars.qdo.full[st.index], st.phase);
      if (i == 0) bwd_trace(c.leader, wg, tiles.iter, kTraceFirstStage);
      const BwdStage<Cfg> stage(smem, base, st.index);

      const BwdColsBuffers buf = bwd_cols_probs(c, p, t.seq, stage, smem, step, m_block, n_block, s, dp, pa, dsa, [&] {
        bwd_issue_scores<Cfg, true>(s, dp, descs.k_rows, descs.v_rows, stage, c.query_base() * kPanelRowBytes);
      });
      bwd_issue_dkdv_ss<Cfg>(dk, dv, smem_addr(buf.p), smem_addr(buf.ds), stage, c.col_base());
      bwd_issue_dq<Cfg>(dq, smem_addr(buf.ds), wg, descs.k_dq);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(dq);
      fence_operands(dk);
      fence_operands(dv);
      if constexpr (Cfg::kDQInRing) {
        // This warpgroup's column halves of Q and dO are no longer read (the header): dQ goes there, and the dQ
        // writer frees the stage after its reduce-adds.
        c.stage_dq_ring(base, st.index, dq);
        fence_proxy_async_smem();
        NamedBarrier::arrive(Cfg::kDQFullBarrier + (step & 1), Cfg::kDQBarrierThreads);
      } else {
        // Q, dO, lse and delta of this stage are no longer read (the statistics before the barrier above; the
        // leader's wait covers the warpgroup's wgmmas).
        if (c.leader) bars.qdo.consumer_release(st);
      }
      st.advance();
      if (i + 1 == walk.total) {
        bwd_trace(c.leader, wg, tiles.iter, kTraceLoopEnd);
        bwd_free_kv<Cfg>(c, bars, tiles);
      }
      if constexpr (!Cfg::kDQInRing) bwd_hand_off_dq<Cfg>(c, p, smem, t.seq, walk.head, m_block, step, dq);
    }
    bwd_end_tile(c, p, tiles, t, dk, dv, c.col_base(), c.col_base());
    step0 += walk.total;
  }
}

}  // namespace fa3nn::hopper
