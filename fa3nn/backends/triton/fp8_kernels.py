"""The Triton FP8 attention forward: e4m3 Q, K and Vᵀ (fa3nn.fp8.operands) -> bf16/fp16 out and fp32 lse.

It performs the rounding points of fa3nn.fp8.reference in order, per (BLOCK_M queries, head, batch) program:

    S  = Q8·K8ᵀ                      e4m3 x e4m3 tensor-core dot, fp32 accumulator
    S *= q_descale[row] * k_descale[key tile] * softmax_scale * log2(e)     (one row vector times one scalar:
                                     BLOCK_N divides block_k, so a key block never straddles two scale tiles)
    softcap, mask; online softmax in exp2 (the bf16 kernel's helpers), l from the fp32 P
    P8 = e4m3(P * 256)               fa3nn.fp8.reference.P_SCALE
    acc = acc * alpha * (v_descale[t-1] / v_descale[t]) + P8·V8    the V descale folded into the rescale, so
                                     acc holds the output in units of the current key tile's V scale; P8·V8 is a
                                     fresh dot per block, added in fp32 (see _fp8_fwd_inner)
    O  = acc * v_descale[last] / (256 * l) in the output dtype;  lse = (m + log2 l) * ln 2

Both dots read their B operand K-major, as Hopper's FP8 wgmma requires: K8 rows are headdim-contiguous (the
reduction of Q·Kᵀ) and Vᵀ rows are key-contiguous (the reduction of P·V). With Triton 3.6 on sm_90a that is what
lets both lower to wgmma instead of a shared-memory transpose.

Under Triton's interpreter the fp32 -> e4m3 cast truncates, so P is rounded onto e4m3's grid in fp32 first
(SOFTWARE_CAST, the quantization pass's helper); the GPU uses the hardware cvt.
"""

from __future__ import annotations

import triton
import triton.language as tl

from fa3nn.backends.triton.kernels import (
    SOFTCAP_PRECISE,
    _allowed,
    _key_phases,
    _load_rows,
    _seq_bounds,
    _tanh,
)
from fa3nn.backends.triton.quantize import _to_e4m3, _vt_key_of_column

LN2 = tl.constexpr(0.6931471805599453)
P_SCALE = tl.constexpr(256.0)  # fa3nn.fp8.reference.P_SCALE


@triton.jit
def _load_vt(vt_base, cols, keys, stride_vtd, offs_dv, seqlen_k, HEADDIM_V: tl.constexpr, BLOCK_DV: tl.constexpr,
             CHECK_COLS: tl.constexpr):
    """(BLOCK_DV, BLOCK_N) tile of Vᵀ: contiguous columns `cols` of one head, which hold keys `keys` (permuted inside
    16-key groups, fa3nn.fp8.operands). Keys past the sequence read as 0 (in a packed batch they belong to the next
    sequence, and 0 * NaN would leak into this one)."""
    ptrs = vt_base + offs_dv[:, None] * stride_vtd + cols[None, :]
    if CHECK_COLS:
        return tl.load(ptrs, mask=(keys[None, :] < seqlen_k) & (offs_dv[:, None] < HEADDIM_V), other=0.0)
    elif BLOCK_DV == HEADDIM_V:
        return tl.load(ptrs)
    else:
        return tl.load(ptrs, mask=offs_dv[:, None] < HEADDIM_V, other=0.0)


@triton.jit
def _fp8_fwd_inner(acc, l_i, m_i, v_scale_now, q8, row_factor, k_base, vt_base, kd_base, vd_base, stride_ks,
                   stride_vtd, block_k, rows, offs_n, offs_d, offs_dv, lo, hi, seqlen_q, seqlen_k, softcap2,
                   window_left, window_right, MASKED: tl.constexpr, HAS_LEFT: tl.constexpr,
                   HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HEADDIM: tl.constexpr,
                   HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
                   SOFTWARE_CAST: tl.constexpr):
    tl.static_assert(BLOCK_N % 16 == 0, "Vᵀ's 16-key groups must not straddle key blocks")
    for n0 in range(lo, hi, BLOCK_N):  # n0: a multiple of BLOCK_N (kernels._key_phases)
        # Vᵀ columns of this block. n0 is a multiple of BLOCK_N, which Triton cannot see through the loop's runtime
        # bounds; told so, it loads Vᵀ with cp.async in 16-byte vectors instead of one LDG.U8 per byte (32 per
        # thread and block, outside the pipeline): offline (Triton 3.6, sm_90a) d128 128x64/8w/3 646 -> 522 warp
        # instructions per 1024 scores, 128x128/8w/3 96 B of spill -> 0, d256 128x64/8w/2 720 -> 216 B.
        cols = tl.multiple_of(n0 + offs_n, 16)
        keys = _vt_key_of_column(cols)  # the key each column holds; S, P and Vᵀ all use this column order
        tile = n0 // block_k
        k_descale = tl.load(kd_base + tile)
        v_descale = tl.load(vd_base + tile)
        k8 = _load_rows(k_base, keys, stride_ks, offs_d, seqlen_k, HEADDIM, BLOCK_D, MASKED)
        s = tl.dot(q8, tl.trans(k8))
        s = s * (row_factor * k_descale)[:, None]
        if HAS_SOFTCAP:
            s = _tanh(s, HAS_SOFTCAP == SOFTCAP_PRECISE) * softcap2
        if MASKED:
            keep = _allowed(rows[:, None], keys[None, :], seqlen_q, seqlen_k, window_left, window_right,
                            HAS_LEFT, HAS_RIGHT)
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASKED:  # a row with no key yet keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN
            m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_new_safe = m_new
        p = tl.exp2(s - m_new_safe[:, None])
        alpha = tl.exp2(m_i - m_new_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        p8 = _to_e4m3(p * P_SCALE, SOFTWARE_CAST)
        vt8 = _load_vt(vt_base, cols, keys, stride_vtd, offs_dv, seqlen_k, HEADDIM_V, BLOCK_DV, MASKED)
        rescale = alpha * (v_scale_now / v_descale)
        # Each block's P8 V8 from a fresh tensor-core accumulator, added in fp32: FP8 wgmma adds into its accumulator
        # with fewer bits than fp32, so acc carried through tl.dot lost the mean of V by ~1.2% per 1000 keys on the
        # H200 (-18.6% at 16k; benchmarks/NOTES.md "every FP8 forward here loses the mean of V").
        acc = acc * rescale[:, None] + tl.dot(p8, tl.trans(vt8))
        v_scale_now = v_descale
        m_i = m_new
    return acc, l_i, m_i, v_scale_now


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "group", "block_q", "block_k", "window_left",
                               "window_right", "MASK_KIND", "SEQ_BUCKET"])
def _fp8_fwd_kernel(
    Q8, K8, VT8, QDescale, KDescale, VDescale, Out, Lse, cu_seqlens_q, cu_seqlens_k, vt_starts,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vtb, stride_vth, stride_vtd,
    stride_qdb, stride_qdh, stride_kdb, stride_kdh,
    stride_ob, stride_os, stride_oh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, group, block_q, block_k, tiles_q,
    qk_scale, softcap2, window_left, window_right,
    MASK_KIND, SEQ_BUCKET,  # autotune keys only
    HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    SOFTWARE_CAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program per (BLOCK_M queries, head, batch); the K/V descales of K/V head h // group are shared with
    K/V (layout (batch, nheads_kv, tiles) for both, strides stride_kd*). qk_scale is softmax_scale * log2(e), or
    softmax_scale / softcap with softcap (then softcap2 = softcap * log2(e)). Varlen: sequence b's Vᵀ columns start
    at vt_starts[b] (fa3nn.fp8.operands), its Q and K rows at cu_seqlens_q[b] and cu_seqlens_k[b]."""
    head = tl.program_id(1)
    batch = tl.program_id(2)
    if HAS_RIGHT:  # causal-like: the last query blocks carry the most keys, launch them first
        block_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        block_m = tl.program_id(0)
    q_start, seqlen_q = _seq_bounds(cu_seqlens_q, batch, seqlen_q, IS_VARLEN)
    k_start, seqlen_k = _seq_bounds(cu_seqlens_k, batch, seqlen_k, IS_VARLEN)
    m0 = block_m * BLOCK_M
    if m0 >= seqlen_q:
        return
    head_kv = head // group
    b64 = batch.to(tl.int64)
    q_base = Q8 + b64 * stride_qb + head.to(tl.int64) * stride_qh + q_start.to(tl.int64) * stride_qs
    k_base = K8 + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_ks
    # a multiple of 16 (fa3nn.fp8.operands: varlen starts are padded to 16 keys; 0 when dense), said so that Triton
    # can load Vᵀ's key-contiguous rows as 16-byte vectors
    vt_start = tl.multiple_of(tl.load(vt_starts + batch), 16) if IS_VARLEN else 0
    vt_base = VT8 + b64 * stride_vtb + head_kv.to(tl.int64) * stride_vth + vt_start.to(tl.int64)
    kd_base = KDescale + batch * stride_kdb + head_kv * stride_kdh
    vd_base = VDescale + batch * stride_kdb + head_kv * stride_kdh
    o_base = Out + b64 * stride_ob + head.to(tl.int64) * stride_oh + q_start.to(tl.int64) * stride_os
    l_base = Lse + b64 * stride_lb + head.to(tl.int64) * stride_lh + q_start

    rows = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q8 = _load_rows(q_base, rows, stride_qs, offs_d, seqlen_q, HEADDIM, BLOCK_D, True)
    q_tile = tl.minimum(rows // block_q, tiles_q - 1)  # rows past the sequence: any valid tile, never stored
    row_factor = tl.load(QDescale + batch * stride_qdb + head * stride_qdh + q_tile) * qk_scale

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    v_scale_now = tl.full([], 1.0, dtype=tl.float32)  # acc is 0 until the first block: any finite start works
    lo, hi, full_lo, full_hi = _key_phases(m0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                           HAS_LEFT, HAS_RIGHT)
    # Keys in ascending order, as the emulation walks them: P is rounded to e4m3 relative to the running maximum, so
    # another block order is another function. With the unmasked run first (the bf16 kernel's order) a left window
    # moved the output 0.27-0.35 of the FP8 error away from the emulation (H200, 2026-11-30); in order, <= 0.1.
    if HAS_LEFT:
        acc, l_i, m_i, v_scale_now = _fp8_fwd_inner(
            acc, l_i, m_i, v_scale_now, q8, row_factor, k_base, vt_base, kd_base, vd_base, stride_ks, stride_vtd,
            block_k, rows, offs_n, offs_d, offs_dv, lo, full_lo, seqlen_q, seqlen_k, softcap2, window_left,
            window_right, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N,
            SOFTWARE_CAST)
    acc, l_i, m_i, v_scale_now = _fp8_fwd_inner(
        acc, l_i, m_i, v_scale_now, q8, row_factor, k_base, vt_base, kd_base, vd_base, stride_ks, stride_vtd,
        block_k, rows, offs_n, offs_d, offs_dv, full_lo, full_hi, seqlen_q, seqlen_k, softcap2, window_left,
        window_right, False, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N,
        SOFTWARE_CAST)
    acc, l_i, m_i, v_scale_now = _fp8_fwd_inner(
        acc, l_i, m_i, v_scale_now, q8, row_factor, k_base, vt_base, kd_base, vd_base, stride_ks, stride_vtd,
        block_k, rows, offs_n, offs_d, offs_dv, full_hi, hi, seqlen_q, seqlen_k, softcap2, window_left,
        window_right, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N,
        SOFTWARE_CAST)

    # Rows that attend no key: l = 0, acc = 0 -> out 0, lse = -inf.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc * (v_scale_now / (l_safe * P_SCALE))[:, None]
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.log2(l_safe)) * LN2)
    row_ok = rows < seqlen_q
    o_ptrs = o_base + rows[:, None] * stride_os + offs_dv[None, :]
    if BLOCK_DV == HEADDIM_V:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    else:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & (offs_dv[None, :] < HEADDIM_V))
    tl.store(l_base + rows, lse, mask=row_ok)

