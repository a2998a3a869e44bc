"""The Triton kernels: forward, and a three-kernel backward (delta, dK/dV, dQ). Launchers live in launch.py.

Every kernel sees one (query block or key block, head, batch) tile and walks the other sequence in blocks. For
16-bit inputs scores are kept in the log2 domain (scale folded with log2(e), so the softmax is one exp2 per
element; LOG2_SCORES), for fp32 in natural units (see _scores); lse is stored in natural log, float64 for fp32
inputs (fa3nn.backends.base.saved_lse_dtype). Masks are bottom-right aligned
(fa3nn.masks): query row i may attend key j when

    i + diag - left  <=  j  <=  i + diag + right,      diag = seqlen_k - seqlen_q,

with HAS_LEFT / HAS_RIGHT saying whether each bound exists (causal is right = 0). The walk over the other sequence
is split in three phases: masked blocks before the fully attended run, the fully attended run itself (no mask,
no bounds checks), masked blocks after it. Blocks that no row attends are never visited.

The default backward has no atomics: dK/dV programs own a key block and loop over the query heads of its K/V head
(GQA by indexing), dQ programs own a query block. So it is bitwise deterministic, at the price of recomputing Q·Kᵀ
and dO·Vᵀ in the dQ kernel (7 matmuls instead of 5). With ATOMIC_DQ the dK/dV kernel also adds dQ into an fp32
buffer by atomics (5 matmuls, run-dependent summation order): opt-in, measured slower on the H200.

Varlen: with IS_VARLEN the batch index selects [cu_seqlens[b], cu_seqlens[b + 1]) of the packed tensors and the
batch strides are 0; otherwise every sequence has the dense lengths.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
# HAS_SOFTCAP's values: 0 none, 1 a cap up to PRECISE_TANH_CAP (every real model's: 30-50), SOFTCAP_PRECISE above it
# (_tanh's polynomial branch; a separate compiled variant, so the common caps keep their kernels as they were).
SOFTCAP_PRECISE = tl.constexpr(2)
PRECISE_TANH_CAP = 100.0


def softcap_mode(softcap: float) -> int:
    """HAS_SOFTCAP for a call's softcap (0 = none)."""
    return 0 if softcap <= 0 else 1 if softcap <= PRECISE_TANH_CAP else int(SOFTCAP_PRECISE)


@triton.jit
def _seq_bounds(cu_seqlens, batch, seqlen_dense, IS_VARLEN: tl.constexpr):
    """(first row in the packed tensor, length) of this batch entry's sequence."""
    if IS_VARLEN:
        start = tl.load(cu_seqlens + batch)
        end = tl.load(cu_seqlens + batch + 1)
        return start, end - start
    else:
        return tl.zeros([], dtype=tl.int32), seqlen_dense


@triton.jit
def _tanh(x, PRECISE: tl.constexpr):
    # exp-based, so it lowers the same on every Triton version and under the interpreter; saturates cleanly to
    # +-1 (exp2 overflows to inf, 2 / inf = 0). Its error is absolute (~6e-8: 1 - 2 / (e + 1) cancels for small
    # |x|), so a capped score carries ~softcap * 6e-8: out 6e-2 off at softcap 1e6, garbage at 1e8 (a fuzz of the
    # interpreter, s58). PRECISE (SOFTCAP_PRECISE, caps above PRECISE_TANH_CAP): the odd Taylor polynomial to x^7
    # below |x| = 1/8 (truncation under 2e-10 relative there), the exp form above.
    t = 1.0 - 2.0 / (tl.exp2(x * (2.0 * LOG2E)) + 1.0)
    if PRECISE:
        x2 = x * x
        small = x + x * x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * -0.05396825396825397))
        t = tl.where(tl.abs(x) < 0.125, small, t)
    return t


@triton.jit
def _allowed(rows, cols, seqlen_q, seqlen_k, window_left, window_right, HAS_LEFT: tl.constexpr,
             HAS_RIGHT: tl.constexpr):
    """Bool tile: key `cols` is attended by query `rows` (both already broadcast to the tile's shape)."""
    diag = rows + (seqlen_k - seqlen_q)
    keep = cols < seqlen_k
    if HAS_RIGHT:
        keep = keep & (cols <= diag + window_right)
    if HAS_LEFT:
        keep = keep & (cols >= diag - window_left)
    return keep


@triton.jit
def _key_phases(m0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """For query rows [m0, m0 + BLOCK_M): key range [lo, hi) that any row attends, and inside it the run
    [full_lo, full_hi) of BLOCK_N blocks that every row attends fully. lo and full_lo/full_hi are block aligned
    (unless clamped to hi, which empties the phases after them)."""
    diag = seqlen_k - seqlen_q
    lo = tl.zeros([], dtype=tl.int32)
    hi = seqlen_k
    full_lo = lo
    full_hi = (seqlen_k // BLOCK_N) * BLOCK_N
    if HAS_LEFT:
        lo = (tl.maximum(m0 + diag - window_left, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.cdiv(tl.maximum(m0 + BLOCK_M - 1 + diag - window_left, 0), BLOCK_N) * BLOCK_N
    if HAS_RIGHT:
        hi = tl.minimum(tl.maximum(m0 + BLOCK_M + diag + window_right, 0), seqlen_k)
        full_hi = tl.minimum(full_hi, (tl.maximum(m0 + diag + window_right + 1, 0) // BLOCK_N) * BLOCK_N)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.maximum(full_hi, full_lo)
    return lo, hi, full_lo, full_hi


@triton.jit
def _query_phases(n0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """The transpose of _key_phases: for keys [n0, n0 + BLOCK_N), the query range [lo, hi) that attends any of
    them and the run [full_lo, full_hi) of BLOCK_M blocks whose every row attends every one of them."""
    diag = seqlen_k - seqlen_q
    lo = tl.zeros([], dtype=tl.int32)
    hi = seqlen_q
    full_lo = lo
    full_hi = (seqlen_q // BLOCK_M) * BLOCK_M
    if HAS_RIGHT:
        lo = (tl.maximum(n0 - diag - window_right, 0) // BLOCK_M) * BLOCK_M
        full_lo = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - diag - window_right, 0), BLOCK_M) * BLOCK_M
    if HAS_LEFT:
        hi = tl.minimum(tl.maximum(n0 + BLOCK_N - diag + window_left, 0), seqlen_q)
        full_hi = tl.minimum(full_hi, (tl.maximum(n0 - diag + window_left + 1, 0) // BLOCK_M) * BLOCK_M)
    full_hi = tl.where(n0 + BLOCK_N > seqlen_k, 0, full_hi)  # a partial key block is checked everywhere
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.maximum(full_hi, full_lo)
    return lo, hi, full_lo, full_hi


@triton.jit
def _load_rows(base, rows, stride_row, offs_d, seqlen, HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr,
               CHECK_ROWS: tl.constexpr):
    """(len(rows), BLOCK_D) tile; rows past `seqlen` and columns past HEADDIM read as 0 (only when asked)."""
    ptrs = base + rows[:, None] * stride_row + offs_d[None, :]
    if CHECK_ROWS:
        if BLOCK_D == HEADDIM:
            return tl.load(ptrs, mask=rows[:, None] < seqlen, other=0.0)
        else:
            return tl.load(ptrs, mask=(rows[:, None] < seqlen) & (offs_d[None, :] < HEADDIM), other=0.0)
    else:
        if BLOCK_D == HEADDIM:
            return tl.load(ptrs)
        else:
            return tl.load(ptrs, mask=offs_d[None, :] < HEADDIM, other=0.0)


@triton.jit
def _load_block(src, seq_start, row0, col, offs_r, stride_row, offs_d, seqlen, HEADDIM: tl.constexpr,
                BLOCK_D: tl.constexpr, CHECK_ROWS: tl.constexpr, USE_TMA: tl.constexpr):
    """Rows [row0, row0 + len(offs_r)) of one head: `src` is a TMA descriptor over the (rows, heads * dim) view
    (USE_TMA == 1 or True; `col` = head * dim), over the (batch, seqlen, heads * dim) view (USE_TMA == 2:
    `seq_start` is the batch index), or the head's base pointer. Through the 2-D view TMA reads rows past `seqlen`
    from whatever follows (the next sequence, or zeros past the tensor's end); with CHECK_ROWS they are zeroed
    here, so nothing non-finite from there can reach a product. Through the 3-D view the copy engine itself fills
    the rows past the batch's seqlen with zeros: no check (nor its trip through registers) is needed."""
    if USE_TMA == 2:
        return tl.reshape(src.load([seq_start, row0, col]), [offs_r.shape[0], BLOCK_D])
    elif USE_TMA:
        tile = src.load([seq_start + row0, col])
        if CHECK_ROWS:
            tile = tl.where((row0 + offs_r)[:, None] < seqlen, tile, 0.0)
        return tile
    else:
        return _load_rows(src, row0 + offs_r, stride_row, offs_d, seqlen, HEADDIM, BLOCK_D, CHECK_ROWS)


@triton.jit
def _scores(s, qk_scale, softcap2, HAS_SOFTCAP: tl.constexpr):
    """Raw Q·Kᵀ -> scaled (and soft-capped) scores, and tanh (for the backward; 0 without softcap). For 16-bit
    inputs the launchers pass log2-unit constants (LOG2_SCORES: one FMA and exp2 per score; the backward converts
    lse once per row). For fp32 they pass natural ones, forward and backward alike: the backward subtracts the
    stored natural lse before exponentiating, which keeps fp32 rounding of |s|, |lse| ~ 10 out of P (measured:
    dq/dk errors 2.2x -> under 2x the fp32 PyTorch error under the interpreter), and the forward's lse of one key
    is then that key's score itself, not a product by log2(e) and back by ln(2) (benchmarks/NOTES.md "fp32
    backward"). For bf16/fp16 that rounding (~1e-6 relative) is far under P's own rounding to 16 bits before the
    matmuls."""
    if HAS_SOFTCAP:
        t = _tanh(s * qk_scale, HAS_SOFTCAP == SOFTCAP_PRECISE)
        return t * softcap2, t
    else:
        return s * qk_scale, 0.0


# ----------------------------------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------------------------------


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_src, v_src, k_start, head_kv, stride_ks, stride_vs, rows, offs_n, offs_d, offs_dv,
               lo, hi, seqlen_q, seqlen_k, qk_scale, softcap2, window_left, window_right,
               MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
               HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
               BLOCK_N: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_TMA: tl.constexpr,
               LOG2_SCORES: tl.constexpr):
    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        if USE_TMA:  # K rows past the end need no zeroing: their scores are masked to -inf (even NaN ones)
            k = _load_block(k_src, k_start, n0, head_kv * HEADDIM, offs_n, stride_ks, offs_d, seqlen_k, HEADDIM,
                            BLOCK_D, False, USE_TMA)
        else:
            k = _load_block(k_src, k_start, n0, head_kv * HEADDIM, offs_n, stride_ks, offs_d, seqlen_k, HEADDIM,
                            BLOCK_D, MASKED, False)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        s, _ = _scores(s, qk_scale, softcap2, HAS_SOFTCAP)
        if MASKED:
            keep = _allowed(rows[:, None], cols[None, :], seqlen_q, seqlen_k, window_left, window_right,
                            HAS_LEFT, HAS_RIGHT)
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASKED:  # a row with no key yet keeps m = -inf; subtract 0 there so exp2 gives 0, not NaN
            m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_new_safe = m_new
        if LOG2_SCORES:  # written out, not _exp: 16-bit kernels keep their exact PTX (NOTES "fp32 backward")
            p = tl.exp2(s - m_new_safe[:, None])
            alpha = tl.exp2(m_i - m_new_safe)
        else:
            p = tl.exp(s - m_new_safe[:, None])
            alpha = tl.exp(m_i - m_new_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_block(v_src, k_start, n0, head_kv * HEADDIM_V, offs_n, stride_vs, offs_dv, seqlen_k, HEADDIM_V,
                        BLOCK_DV, MASKED, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _with_sink(acc, l_i, m_i, sink, LOG2_SCORES: tl.constexpr):
    """(out, lse) of rows whose softmax sum gets one more term exp(sink) without a value (fa3nn.sinks; the native
    forward's OnlineSoftmax::finalize): the sum taken against max(row max, sink) so that neither term overflows; a row
    that attended no key keeps out = 0 and gets lse = the sink (-inf without one). m_i, l_i: the running maximum and
    sum (log2 units with LOG2_SCORES, natural otherwise, the fp32 path's lse in float64)."""
    empty = l_i == 0.0
    if LOG2_SCORES:
        sink_units = sink * LOG2E
    else:
        sink_units = sink
    top = tl.maximum(m_i, sink_units)
    top = tl.where(top == float("-inf"), 0.0, top)  # (a row without keys under a sink of -inf: nothing to scale)
    if LOG2_SCORES:
        row_scale = tl.exp2(m_i - top)
        total = l_i * row_scale + tl.exp2(sink_units - top)
    else:
        row_scale = tl.exp(m_i - top)
        total = l_i * row_scale + tl.exp(sink_units - top)
    total_safe = tl.where(empty, 1.0, total)
    out = acc * tl.where(empty, 0.0, row_scale / total_safe)[:, None]
    if LOG2_SCORES:
        lse = tl.where(empty, sink, (top + tl.log2(total_safe)) * LN2)
    else:
        lse = tl.where(empty, sink.to(tl.float64), top.to(tl.float64) + tl.log(total_safe.to(tl.float64)))
    return out, lse


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "group", "window_left", "window_right", "MASK_KIND",
                               "SEQ_BUCKET"])
def _fwd_kernel(
    Q, K, V, Out, Lse, Sinks, cu_seqlens_q, cu_seqlens_k,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ob, stride_os, stride_oh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, group,
    qk_scale, softcap2, window_left, window_right,
    MASK_KIND, SEQ_BUCKET,  # autotune keys only
    HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    DOT_PRECISION: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    LOG2_SCORES: tl.constexpr, HAS_SINKS: tl.constexpr,
):
    """Q, K, V are pointers, or with USE_TMA tensor descriptors over the (rows, heads * dim) views (1) or, dense
    calls, the (batch, seqlen, heads * dim) views (2: launch.TMA_BATCHED). LOG2_SCORES (16-bit inputs): scores in
    log2 units, one exp2 each, lse stored in float32; fp32 inputs keep natural units and store lse in float64
    (saved_lse_dtype): lse = m + log(l) then carries l's own rounding (each exp, the rescales, the sum) and the
    scores', but no log2(e) / ln(2) products and no rounding of its own before the backward. HAS_SINKS: Sinks holds
    a logit per query head (natural units of the scaled scores; fa3nn.sinks) that joins each row's sum without a
    value (_with_sink)."""
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
    if USE_TMA:  # descriptors address rows of the packed (batch * seqlen or total, heads * dim) view
        q_src, k_src, v_src = Q, K, V
        if IS_VARLEN:
            q_row0 = q_start
            k_row0 = k_start
        elif USE_TMA == 2:  # or (batch, seqlen, heads * dim): the batch is the first coordinate
            q_row0 = batch
            k_row0 = batch
        else:
            q_row0 = batch * seqlen_q
            k_row0 = batch * seqlen_k
    else:
        q_src = Q + b64 * stride_qb + head.to(tl.int64) * stride_qh + q_start.to(tl.int64) * stride_qs
        k_src = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_ks
        v_src = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh + k_start.to(tl.int64) * stride_vs
        q_row0 = q_start
        k_row0 = k_start
    o_base = Out + b64 * stride_ob + head.to(tl.int64) * stride_oh + q_start.to(tl.int64) * stride_os
    l_base = Lse + b64 * stride_lb + head.to(tl.int64) * stride_lh + q_start

    rows = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = _load_block(q_src, q_row0, m0, head * HEADDIM, tl.arange(0, BLOCK_M), stride_qs, offs_d, seqlen_q, HEADDIM,
                    BLOCK_D, True, USE_TMA)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    lo, hi, full_lo, full_hi = _key_phases(m0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                           HAS_LEFT, HAS_RIGHT)
    # Unmasked run first: its blocks need neither bounds checks nor the -inf guard.
    acc, l_i, m_i = _fwd_inner(
        acc, l_i, m_i, q, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows, offs_n, offs_d, offs_dv,
        full_lo, full_hi, seqlen_q, seqlen_k, qk_scale, softcap2, window_left, window_right, False, HAS_LEFT,
        HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N, DOT_PRECISION, USE_TMA, LOG2_SCORES)
    if HAS_LEFT:
        acc, l_i, m_i = _fwd_inner(
            acc, l_i, m_i, q, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows, offs_n, offs_d, offs_dv,
            lo, full_lo, seqlen_q, seqlen_k, qk_scale, softcap2, window_left, window_right, True, HAS_LEFT,
            HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N, DOT_PRECISION, USE_TMA, LOG2_SCORES)
    acc, l_i, m_i = _fwd_inner(
        acc, l_i, m_i, q, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows, offs_n, offs_d, offs_dv,
        full_hi, hi, seqlen_q, seqlen_k, qk_scale, softcap2, window_left, window_right, True, HAS_LEFT,
        HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_N, DOT_PRECISION, USE_TMA, LOG2_SCORES)

    # Rows that attend no key: l = 0, acc = 0 -> out 0, lse = log2(0) = -inf (or the sink).
    if HAS_SINKS:
        out, lse = _with_sink(acc, l_i, m_i, tl.load(Sinks + head).to(tl.float32), LOG2_SCORES)
    else:
        l_safe = tl.where(l_i == 0.0, 1.0, l_i)
        out = acc / l_safe[:, None]
        if LOG2_SCORES:
            lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.log2(l_safe)) * LN2)
        else:
            lse = tl.where(l_i == 0.0, float("-inf"), m_i.to(tl.float64) + tl.log(l_safe.to(tl.float64)))
    row_ok = rows < seqlen_q
    o_ptrs = o_base + rows[:, None] * stride_os + offs_dv[None, :]
    if BLOCK_DV == HEADDIM_V:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    else:
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & (offs_dv[None, :] < HEADDIM_V))
    tl.store(l_base + rows, lse, mask=row_ok)


# ----------------------------------------------------------------------------------------------------------------
# Backward
# ----------------------------------------------------------------------------------------------------------------


@triton.jit(do_not_specialize=["seqlen_q"])
def _bwd_delta_kernel(
    Out, dOut, dLse, Delta, cu_seqlens_q,
    stride_ob, stride_os, stride_oh,
    stride_dob, stride_dos, stride_doh,
    stride_lb, stride_lh,  # shared by dLse and Delta (both laid out like lse)
    seqlen_q,
    HEADDIM_V: tl.constexpr, BLOCK_DV: tl.constexpr, IS_VARLEN: tl.constexpr, HAS_DLSE: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """delta = rowsum(dO * O) - dlse, stored in float32 (dlse: the gradient flowing into lse). For fp32 inputs the
    products and the sum run in float64, rounded once: delta's error enters every dS of its row alike (in the
    interpreter's fp32 sweep, benchmarks/NOTES.md "fp32 backward": worst dQ 1.08 -> 0.64 of the error-ratio bound)."""
    head = tl.program_id(1)
    batch = tl.program_id(2)
    q_start, seqlen_q = _seq_bounds(cu_seqlens_q, batch, seqlen_q, IS_VARLEN)
    m0 = tl.program_id(0) * BLOCK_M
    if m0 >= seqlen_q:
        return
    b64 = batch.to(tl.int64)
    rows = m0 + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    o_base = Out + b64 * stride_ob + head.to(tl.int64) * stride_oh + q_start.to(tl.int64) * stride_os
    do_base = dOut + b64 * stride_dob + head.to(tl.int64) * stride_doh + q_start.to(tl.int64) * stride_dos
    o = _load_rows(o_base, rows, stride_os, offs_dv, seqlen_q, HEADDIM_V, BLOCK_DV, True).to(tl.float32)
    do = _load_rows(do_base, rows, stride_dos, offs_dv, seqlen_q, HEADDIM_V, BLOCK_DV, True).to(tl.float32)
    if Out.dtype.element_ty == tl.float32:
        delta = tl.sum(o.to(tl.float64) * do.to(tl.float64), 1)
    else:
        delta = tl.sum(o * do, 1)
    l_offset = b64 * stride_lb + head.to(tl.int64) * stride_lh + q_start
    row_ok = rows < seqlen_q
    if HAS_DLSE:
        delta -= tl.load(dLse + l_offset + rows, mask=row_ok, other=0.0).to(delta.dtype)
    tl.store(Delta + l_offset + rows, delta.to(tl.float32), mask=row_ok)


@triton.jit
def _load_row_stats(lse_base, delta_base, rows, seqlen_q, LOG2_SCORES: tl.constexpr, CHECK_ROWS: tl.constexpr = True,
                    WITH_DELTA: tl.constexpr = True):
    """lse (times log2(e) with LOG2_SCORES) with -inf (row attends nothing) and rows past the end turned into
    +inf, so that exp(s - lse) is 0 there instead of NaN; and delta. CHECK_ROWS=False is for rows that all exist
    and all attend some key (the dK/dV kernel's unmasked run): neither case can occur, so the values are the same
    without the bounds mask and the -inf test. WITH_DELTA=False (the output split's dV kernel) never reads delta
    (zeros in its place): the launcher may run that kernel while the delta kernel is still writing it."""
    if CHECK_ROWS:
        row_ok = rows < seqlen_q
        lse = tl.load(lse_base + rows, mask=row_ok, other=float("inf"))
        lse = tl.where(lse == float("-inf"), float("inf"), lse)
    else:
        lse = tl.load(lse_base + rows)
    if not WITH_DELTA:
        delta = tl.zeros_like(lse)
    elif CHECK_ROWS:
        delta = tl.load(delta_base + rows, mask=rows < seqlen_q, other=0.0)
    else:
        delta = tl.load(delta_base + rows)
    if LOG2_SCORES:
        lse = lse * LOG2E
    return lse, delta


@triton.jit
def _score_minus_lse(s, lse, qk_scale, score_cap, HAS_SOFTCAP: tl.constexpr, LOG2_SCORES: tl.constexpr):
    """Raw Q·Kᵀ -> the exponent of P = exp(score - lse) (log2 units with LOG2_SCORES: one FMA per score without
    softcap; natural units otherwise, see _scores), and tanh for the softcap derivative (0 without softcap).
    Written as an explicit FMA because ptxas left the multiply and the subtract apart (sm_90a SASS of the dK/dV
    kernel, head dim 128: one FMUL and one FADD per score). fp32 inputs bring a float64 lse (saved_lse_dtype):
    the difference is taken in float64 and rounded once, so lse's own rounding never reaches P."""
    if HAS_SOFTCAP or not LOG2_SCORES:
        scores, tanh = _scores(s, qk_scale, score_cap, HAS_SOFTCAP)
        return (scores - lse).to(tl.float32), tanh
    else:
        return tl.fma(s, qk_scale, -lse), 0.0


@triton.jit
def _exp(x, LOG2_SCORES: tl.constexpr):
    if LOG2_SCORES:
        return tl.exp2(x)
    else:
        return tl.exp(x)


@triton.jit
def _probs(a, b, lse_b, rows_b, cols_b, seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right,
           MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
           DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr):
    """The backward's recomputed probabilities P = exp(score(a b^T) - lse) and tanh (softcap), masked: a, b are Q
    and K for query-major tiles (queries x keys), K and Q for key-major ones; lse_b, rows_b and cols_b are lse, the
    query rows and the key columns broadcast to that tile's orientation."""
    s = tl.dot(a, tl.trans(b), input_precision=DOT_PRECISION)
    x, tanh = _score_minus_lse(s, lse_b, qk_scale, score_cap, HAS_SOFTCAP, LOG2_SCORES)
    if MASKED:
        keep = _allowed(rows_b, cols_b, seqlen_q, seqlen_k, window_left, window_right, HAS_LEFT, HAS_RIGHT)
        x = tl.where(keep, x, float("-inf"))
    return _exp(x, LOG2_SCORES), tanh


@triton.jit
def _add_block_sum(block_sum, acc):
    """acc + one block's product, for the backward's dK, dV and dQ with fp32 inputs ("ieee" dots: Triton lowers
    them to one FMA per product in K's order, no tensor cores). Each block's product is summed on its own and
    added with one rounding, so a sum over a whole sequence (and over the heads of a GQA group) is no single FMA
    chain of that length: one chain of 239 rows measured 2.3x plain fp32 PyTorch's error (benchmarks/NOTES.md
    "fp32 backward"). An FMA by 1, not `acc + block_sum`: Triton's combine pass turns `acc + dot(a, b)` back into
    dot(a, b, acc). The callers write the 16-bit branch (tl.dot into the accumulator) out themselves: any new
    inlined call changes their PTX's debug labels, and with them ptxas's schedule."""
    return tl.fma(block_sum, 1.0, acc)


@triton.jit
def _load_part(base, rows, stride_row, offs_part, seqlen, HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr,
               SPLIT_D: tl.constexpr, CHECK_ROWS: tl.constexpr):
    """The columns `offs_part` (one of SPLIT_D equal parts of BLOCK_D) of a (rows, BLOCK_D) tile, as _load_rows;
    columns past HEADDIM masked only when the head dim is padded."""
    if BLOCK_D == HEADDIM:
        return _load_rows(base, rows, stride_row, offs_part, seqlen, BLOCK_D // SPLIT_D, BLOCK_D // SPLIT_D,
                          CHECK_ROWS)
    else:
        return _load_rows(base, rows, stride_row, offs_part, seqlen, HEADDIM, BLOCK_D // SPLIT_D, CHECK_ROWS)


@triton.jit
def _bwd_dkdv_step(dk, dv, k, k_dq, v, m0, q_base, do_base, q_row0, q_col, do_col, lse_base, delta_base, dq_dst,
                   dq_batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv, offs_dk,
                   offs_dvk, seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right,
                   MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                   HAS_SOFTCAP: tl.constexpr, HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr,
                   DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr, ATOMIC_DQ: tl.constexpr,
                   DQ_TMA: tl.constexpr, UNMASKED_ROW_STATS: tl.constexpr, SPLIT_D: tl.constexpr,
                   QDO_TMA: tl.constexpr, QUERY_MAJOR: tl.constexpr, WITH_DK: tl.constexpr, WITH_DV: tl.constexpr):
    """One query block [m0, m0 + BLOCK_M) of one key block: dK and dV accumulated (WITH_DK / WITH_DV: only one of
    them, for the output-split backward; the other accumulator is returned as it came); with ATOMIC_DQ the block's
    share of dQ (unscaled: the launcher multiplies the sum by the softmax scale once) added into the fp32
    accumulator, by one TMA reduce-add of the whole tile (DQ_TMA: `dq_dst` is a descriptor over the (batch,
    seqlen, heads * dim) view, clipped at seqlen_q by the copy engine) or by per-element atomics.
    SPLIT_D > 1: dK and dV are accumulated for the head-dim columns offs_dk / offs_dvk only (one of SPLIT_D parts);
    the scores and dP still contract over the whole head dim; with ATOMIC_DQ the program adds dQ's offs_dk columns
    (dS times `k_dq`, K's columns of this part; `k` itself when SPLIT_D == 1).
    QDO_TMA: `q_base` / `do_base` are descriptors over the (rows, heads * dim) views (1), the head's rows starting
    at `q_row0` and its columns at `q_col` / `do_col`, or over the dense (batch, seqlen, heads * dim) views (2;
    `q_row0` = the batch index) (SPLIT_D == 1 only); rows past seqlen_q are zeroed (1: in the masked run; 2: by the
    copy engine) (they enter dK = dS^T Q and dP, where a non-finite value would survive dS = 0)."""
    rows = m0 + offs_m
    q = _load_block(q_base, q_row0, m0, q_col, offs_m, stride_qs, offs_d, seqlen_q, HEADDIM, BLOCK_D, MASKED, QDO_TMA)
    do = _load_block(do_base, q_row0, m0, do_col, offs_m, stride_dos, offs_dv, seqlen_q, HEADDIM_V, BLOCK_DV, MASKED,
                     QDO_TMA)
    if SPLIT_D > 1:
        q_part = _load_part(q_base, rows, stride_qs, offs_dk, seqlen_q, HEADDIM, BLOCK_D, SPLIT_D, MASKED)
        do_part = _load_part(do_base, rows, stride_dos, offs_dvk, seqlen_q, HEADDIM_V, BLOCK_DV, SPLIT_D, MASKED)
    else:
        q_part = q
        do_part = do
    lse, delta = _load_row_stats(lse_base, delta_base, rows, seqlen_q, LOG2_SCORES, MASKED or not UNMASKED_ROW_STATS,
                                 WITH_DK)
    if QUERY_MAJOR:  # scores as (BLOCK_M, BLOCK_N), queries x keys; P and dS transposed for the dV / dK products
        p, tanh = _probs(q, k, lse[:, None], rows[:, None], cols[None, :], seqlen_q, seqlen_k, qk_scale, score_cap,
                         window_left, window_right, MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, DOT_PRECISION,
                         LOG2_SCORES)
        if WITH_DV:
            if DOT_PRECISION == "ieee":
                dv = _add_block_sum(tl.dot(tl.trans(p.to(do.dtype)), do_part, input_precision=DOT_PRECISION), dv)
            else:
                dv = tl.dot(tl.trans(p.to(do.dtype)), do_part, dv, input_precision=DOT_PRECISION)
        if WITH_DK:
            dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
            ds = p * (dp - delta[:, None])
            if HAS_SOFTCAP:
                ds = ds * (1.0 - tanh * tanh)
            ds_t = tl.trans(ds.to(q.dtype))
    else:
        p_t, tanh_t = _probs(k, q, lse[None, :], rows[None, :], cols[:, None], seqlen_q, seqlen_k, qk_scale,
                             score_cap, window_left, window_right, MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP,
                             DOT_PRECISION, LOG2_SCORES)  # (BLOCK_N, BLOCK_M): keys x queries
        if WITH_DV:
            if DOT_PRECISION == "ieee":
                dv = _add_block_sum(tl.dot(p_t.to(do.dtype), do_part, input_precision=DOT_PRECISION), dv)
            else:
                dv = tl.dot(p_t.to(do.dtype), do_part, dv, input_precision=DOT_PRECISION)
        if WITH_DK:
            dp_t = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)
            ds_t = p_t * (dp_t - delta[None, :])
            if HAS_SOFTCAP:
                ds_t = ds_t * (1.0 - tanh_t * tanh_t)
            ds_t = ds_t.to(q.dtype)
    if WITH_DK:
        if DOT_PRECISION == "ieee":
            dk = _add_block_sum(tl.dot(ds_t, q_part, input_precision=DOT_PRECISION), dk)
        else:
            dk = tl.dot(ds_t, q_part, dk, input_precision=DOT_PRECISION)
    if ATOMIC_DQ:  # this key block's share of dQ, added into the fp32 accumulator (order varies run to run)
        dq = tl.dot(tl.trans(ds_t), k_dq, input_precision=DOT_PRECISION)
        if DQ_TMA:
            dq_dst.atomic_add([dq_batch, m0, dq_col], tl.reshape(dq, [1, BLOCK_M, BLOCK_D // SPLIT_D]))
        else:
            dq_ptrs = dq_dst + rows[:, None] * stride_dqs + offs_dk[None, :]
            if MASKED:
                tl.atomic_add(dq_ptrs, dq, mask=(rows[:, None] < seqlen_q) & (offs_dk[None, :] < HEADDIM),
                              sem="relaxed")
            elif BLOCK_D == HEADDIM:
                tl.atomic_add(dq_ptrs, dq, sem="relaxed")
            else:
                tl.atomic_add(dq_ptrs, dq, mask=offs_dk[None, :] < HEADDIM, sem="relaxed")
    return dk, dv


@triton.jit
def _bwd_dkdv_inner(dk, dv, k, k_dq, v, q_base, do_base, q_row0, q_col, do_col, lse_base, delta_base, dq_dst,
                    dq_batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv, offs_dk,
                    offs_dvk, lo, hi, rotate,
                    seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right,
                    MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                    HAS_SOFTCAP: tl.constexpr, HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_M: tl.constexpr,
                    DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr, ATOMIC_DQ: tl.constexpr,
                    DQ_TMA: tl.constexpr, UNMASKED_ROW_STATS: tl.constexpr, ROTATE: tl.constexpr,
                    SPLIT_D: tl.constexpr, QDO_TMA: tl.constexpr, QUERY_MAJOR: tl.constexpr,
                    WITH_DK: tl.constexpr, WITH_DV: tl.constexpr):
    """Query blocks [lo, hi) in order, or with ROTATE (block-aligned runs only) starting at block `rotate` of
    the run and wrapping: the atomic-dQ backward's programs of one head then add into different dQ rows at
    the same moment instead of all into the run's first block."""
    if ROTATE:
        steps = (hi - lo) // BLOCK_M
        for i in range(0, steps):
            m0 = lo + ((i + rotate) % steps) * BLOCK_M
            dk, dv = _bwd_dkdv_step(
                dk, dv, k, k_dq, v, m0, q_base, do_base, q_row0, q_col, do_col, lse_base, delta_base, dq_dst,
                dq_batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv, offs_dk, offs_dvk,
                seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right, MASKED, HAS_LEFT, HAS_RIGHT,
                HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, DOT_PRECISION, LOG2_SCORES, ATOMIC_DQ,
                DQ_TMA, UNMASKED_ROW_STATS, SPLIT_D, QDO_TMA, QUERY_MAJOR, WITH_DK, WITH_DV)
    else:
        for m0 in range(lo, hi, BLOCK_M):
            dk, dv = _bwd_dkdv_step(
                dk, dv, k, k_dq, v, m0, q_base, do_base, q_row0, q_col, do_col, lse_base, delta_base, dq_dst,
                dq_batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv, offs_dk, offs_dvk,
                seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right, MASKED, HAS_LEFT, HAS_RIGHT,
                HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, DOT_PRECISION, LOG2_SCORES, ATOMIC_DQ,
                DQ_TMA, UNMASKED_ROW_STATS, SPLIT_D, QDO_TMA, QUERY_MAJOR, WITH_DK, WITH_DV)
    return dk, dv


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "group", "window_left", "window_right", "MASK_KIND",
                               "SEQ_BUCKET"])
def _bwd_dkdv_kernel(
    Q, K, V, dOut, Lse, Delta, dK, dV, dQacc, cu_seqlens_q, cu_seqlens_k,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_dob, stride_dos, stride_doh,
    stride_dkb, stride_dks, stride_dkh,
    stride_dvb, stride_dvs, stride_dvh,
    stride_dqb, stride_dqs, stride_dqh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, group,
    softmax_scale, qk_scale, score_cap, window_left, window_right,
    MASK_KIND, SEQ_BUCKET,
    HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr, ATOMIC_DQ: tl.constexpr,
    UNMASKED_ROW_STATS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DQ_TMA: tl.constexpr = False,
    SPLIT_D: tl.constexpr = 1, QDO_TMA: tl.constexpr = False, QUERY_MAJOR: tl.constexpr = False,
    WITH_DK: tl.constexpr = True, WITH_DV: tl.constexpr = True,
):
    """One program per (key block, K/V head, batch): dK, dV summed over the `group` query heads that share it.
    With ATOMIC_DQ it also adds dS·K into the fp32 dQacc (5 matmuls in all instead of 7 with the separate dQ
    kernel, but the float additions land in a run-dependent order: not bitwise deterministic); DQ_TMA: dQacc is
    a TMA descriptor over its (batch, seqlen, heads * dim) view and each step adds its tile with one bulk
    reduce-add. The atomic backward walks each unmasked run starting at the program's own key block index
    (wrapping), so the programs of one head do not all add into the same dQ rows at once.
    UNMASKED_ROW_STATS: the unmasked run loads lse and delta without the row bounds mask and the -inf test, which
    cannot fire there (same values, bitwise). sm_90a SASS (Triton 3.6): the d128 64x128 step loses 156 of its 647
    instructions, mostly the per-element predicates of the replicated lse/delta loads (benchmarks/NOTES.md, v3).
    SPLIT_D > 1: SPLIT_D programs per key block, each accumulating dK and dV for one part of the head-dim columns
    while recomputing the scores and dP over all of them: more matmul work, SPLIT_D times fewer accumulator
    registers (the d256 tiles spill without it; benchmarks/NOTES.md); with ATOMIC_DQ each part adds its columns of
    dQ (the opt-in atomic backward at head dims >= 256: 7 matmul-equivalents per key block and query block
    instead of the two-kernel split backward's 9). QDO_TMA: Q and dOut are tensor descriptors over their (rows,
    heads * dim) views (1) or, dense calls only, their (batch, seqlen, heads * dim) views (2) (launch.
    DKDV_TMA_LOADS, TMA_BATCHED; SPLIT_D == 1). WITH_DK / WITH_DV: the output split (launch.
    key_block_kinds) launches this kernel twice, once computing and storing only dV (S, P, dV: 2 matmuls) and once
    only dK (S, dP, dK: 3), one accumulator each; the d256 default (H200: +12..+23% over SPLIT_D = 2); with
    ATOMIC_DQ the dK program adds dQ (dS K: 4 matmuls, and no dQ kernel)."""
    tl.static_assert(not QDO_TMA or SPLIT_D == 1, "the head-dim split loads its parts of Q and dO by pointers")
    tl.static_assert(QDO_TMA != 2 or not IS_VARLEN, "the (batch, seqlen) descriptors are for dense calls")
    tl.static_assert(WITH_DK or WITH_DV, "a dK/dV program computes dK, dV or both")
    tl.static_assert((WITH_DK and WITH_DV) or (SPLIT_D == 1 and (WITH_DK or not ATOMIC_DQ)),
                     "the output split is the alternative to the head-dim split; its dK kernel adds the atomic dQ")
    head_kv = tl.program_id(1)
    batch = tl.program_id(2)
    q_start, seqlen_q = _seq_bounds(cu_seqlens_q, batch, seqlen_q, IS_VARLEN)
    k_start, seqlen_k = _seq_bounds(cu_seqlens_k, batch, seqlen_k, IS_VARLEN)
    part = tl.program_id(0) % SPLIT_D
    n0 = (tl.program_id(0) // SPLIT_D) * BLOCK_N
    if n0 >= seqlen_k:
        return
    b64 = batch.to(tl.int64)
    cols = n0 + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_dk = part * (BLOCK_D // SPLIT_D) + tl.arange(0, BLOCK_D // SPLIT_D)  # this program's dK columns
    offs_dvk = part * (BLOCK_DV // SPLIT_D) + tl.arange(0, BLOCK_DV // SPLIT_D)  # and dV columns
    k_base = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_ks
    v_base = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh + k_start.to(tl.int64) * stride_vs
    k = _load_rows(k_base, cols, stride_ks, offs_d, seqlen_k, HEADDIM, BLOCK_D, True)
    v = _load_rows(v_base, cols, stride_vs, offs_dv, seqlen_k, HEADDIM_V, BLOCK_DV, True)
    if ATOMIC_DQ and SPLIT_D > 1:  # dQ's columns of this part take K's same columns
        k_dq = _load_part(k_base, cols, stride_ks, offs_dk, seqlen_k, HEADDIM, BLOCK_D, SPLIT_D, True)
    else:
        k_dq = k
    dk = tl.zeros([BLOCK_N, BLOCK_D // SPLIT_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV // SPLIT_D], dtype=tl.float32)
    lo, hi, full_lo, full_hi = _query_phases(n0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                             HAS_LEFT, HAS_RIGHT)
    rotate = tl.program_id(0)
    if IS_VARLEN:
        q_row0 = q_start
    elif QDO_TMA == 2:  # the batch index: the (batch, seqlen, heads * dim) descriptors' first coordinate
        q_row0 = batch
    else:
        q_row0 = batch * seqlen_q
    dq_col0 = part * (BLOCK_D // SPLIT_D)  # this part's first dQ column within a head (TMA reduce coordinate)
    for g in range(0, group):
        head = head_kv * group + g
        h64 = head.to(tl.int64)
        if QDO_TMA:  # descriptors address rows of the packed (batch * seqlen or total, heads * dim) view
            q_base, do_base = Q, dOut
        else:
            q_base = Q + b64 * stride_qb + h64 * stride_qh + q_start.to(tl.int64) * stride_qs
            do_base = dOut + b64 * stride_dob + h64 * stride_doh + q_start.to(tl.int64) * stride_dos
        l_offset = b64 * stride_lb + h64 * stride_lh + q_start
        dq_col = dq_col0 + head * HEADDIM
        if DQ_TMA:
            dq_dst = dQacc
        else:
            dq_dst = dQacc + b64 * stride_dqb + h64 * stride_dqh + q_start.to(tl.int64) * stride_dqs
        dk, dv = _bwd_dkdv_inner(
            dk, dv, k, k_dq, v, q_base, do_base, q_row0, head * HEADDIM, head * HEADDIM_V, Lse + l_offset,
            Delta + l_offset, dq_dst, batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv,
            offs_dk, offs_dvk, full_lo, full_hi,
            rotate, seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right, False, HAS_LEFT, HAS_RIGHT,
            HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, DOT_PRECISION, LOG2_SCORES, ATOMIC_DQ,
            DQ_TMA, UNMASKED_ROW_STATS, ATOMIC_DQ, SPLIT_D, QDO_TMA, QUERY_MAJOR, WITH_DK, WITH_DV)
        if HAS_RIGHT:  # without a right bound full_lo == lo: nothing masked before the full run
            dk, dv = _bwd_dkdv_inner(
                dk, dv, k, k_dq, v, q_base, do_base, q_row0, head * HEADDIM, head * HEADDIM_V, Lse + l_offset,
                Delta + l_offset, dq_dst, batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d,
                offs_dv, offs_dk, offs_dvk, lo, full_lo, 0,
                seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right, True, HAS_LEFT, HAS_RIGHT,
                HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, DOT_PRECISION, LOG2_SCORES, ATOMIC_DQ,
                DQ_TMA, UNMASKED_ROW_STATS, False, SPLIT_D, QDO_TMA, QUERY_MAJOR, WITH_DK, WITH_DV)
        dk, dv = _bwd_dkdv_inner(
            dk, dv, k, k_dq, v, q_base, do_base, q_row0, head * HEADDIM, head * HEADDIM_V, Lse + l_offset,
            Delta + l_offset, dq_dst, batch, dq_col, stride_qs, stride_dos, stride_dqs, cols, offs_m, offs_d, offs_dv,
            offs_dk, offs_dvk, full_hi, hi, 0,
            seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right, True, HAS_LEFT, HAS_RIGHT,
            HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV, BLOCK_M, DOT_PRECISION, LOG2_SCORES, ATOMIC_DQ,
            DQ_TMA, UNMASKED_ROW_STATS, False, SPLIT_D, QDO_TMA, QUERY_MAJOR, WITH_DK, WITH_DV)
    dk = dk * softmax_scale
    key_ok = cols < seqlen_k
    dk_ptrs = dK + b64 * stride_dkb + head_kv.to(tl.int64) * stride_dkh + (k_start + cols)[:, None].to(
        tl.int64) * stride_dks + offs_dk[None, :]
    dv_ptrs = dV + b64 * stride_dvb + head_kv.to(tl.int64) * stride_dvh + (k_start + cols)[:, None].to(
        tl.int64) * stride_dvs + offs_dvk[None, :]
    if WITH_DK:
        tl.store(dk_ptrs, dk.to(dK.dtype.element_ty), mask=key_ok[:, None] & (offs_dk[None, :] < HEADDIM))
    if WITH_DV:
        tl.store(dv_ptrs, dv.to(dV.dtype.element_ty), mask=key_ok[:, None] & (offs_dvk[None, :] < HEADDIM_V))


@triton.jit
def _bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, k_start, head_kv, stride_ks, stride_vs, rows, offs_n, offs_d,
                  offs_dv, lo, hi, seqlen_q, seqlen_k, qk_scale, score_cap, window_left, window_right,
                  MASKED: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                  HAS_SOFTCAP: tl.constexpr, HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr,
                  BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
                  DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr, USE_TMA: tl.constexpr):
    """k_src / v_src: the head's K and V base pointers, or (USE_TMA) descriptors over the (rows, heads * dim)
    views. K and V rows past seqlen_k are zeroed in the masked run either way: K enters dQ = dS K and V enters dP,
    so a non-finite value there would survive dS = 0."""
    for n0 in range(lo, hi, BLOCK_N):
        cols = n0 + offs_n
        k = _load_block(k_src, k_start, n0, head_kv * HEADDIM, offs_n, stride_ks, offs_d, seqlen_k, HEADDIM,
                        BLOCK_D, MASKED, USE_TMA)
        v = _load_block(v_src, k_start, n0, head_kv * HEADDIM_V, offs_n, stride_vs, offs_dv, seqlen_k, HEADDIM_V,
                        BLOCK_DV, MASKED, USE_TMA)
        p, tanh = _probs(q, k, lse[:, None], rows[:, None], cols[None, :], seqlen_q, seqlen_k, qk_scale, score_cap,
                         window_left, window_right, MASKED, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, DOT_PRECISION,
                         LOG2_SCORES)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
        ds = p * (dp - delta[:, None])
        if HAS_SOFTCAP:
            ds = ds * (1.0 - tanh * tanh)
        if DOT_PRECISION == "ieee":
            dq = _add_block_sum(tl.dot(ds.to(k.dtype), k, input_precision=DOT_PRECISION), dq)
        else:
            dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    return dq


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "group", "window_left", "window_right", "MASK_KIND",
                               "SEQ_BUCKET"])
def _bwd_dq_kernel(
    Q, K, V, dOut, Lse, Delta, dQ, cu_seqlens_q, cu_seqlens_k,
    stride_qb, stride_qs, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_dob, stride_dos, stride_doh,
    stride_dqb, stride_dqs, stride_dqh,
    stride_lb, stride_lh,
    seqlen_q, seqlen_k, group,
    softmax_scale, qk_scale, score_cap, window_left, window_right,
    MASK_KIND, SEQ_BUCKET,
    HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    IS_VARLEN: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    DOT_PRECISION: tl.constexpr, LOG2_SCORES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    USE_TMA: tl.constexpr = False,
):
    """One program per (query block, head, batch): dQ = scale * dS·K over the keys the block attends. USE_TMA: K
    and V are tensor descriptors over their (rows, heads * dim) views (launch.DQ_TMA_LOADS)."""
    head = tl.program_id(1)
    batch = tl.program_id(2)
    if HAS_RIGHT:
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
    h64 = head.to(tl.int64)
    q_base = Q + b64 * stride_qb + h64 * stride_qh + q_start.to(tl.int64) * stride_qs
    do_base = dOut + b64 * stride_dob + h64 * stride_doh + q_start.to(tl.int64) * stride_dos
    if USE_TMA:  # descriptors address rows of the packed (batch * seqlen or total, heads * dim) view
        k_src, v_src = K, V
        if IS_VARLEN:
            k_row0 = k_start
        elif USE_TMA == 2:  # or (batch, seqlen, heads * dim): the batch is the first coordinate
            k_row0 = batch
        else:
            k_row0 = batch * seqlen_k
    else:
        k_src = K + b64 * stride_kb + head_kv.to(tl.int64) * stride_kh + k_start.to(tl.int64) * stride_ks
        v_src = V + b64 * stride_vb + head_kv.to(tl.int64) * stride_vh + k_start.to(tl.int64) * stride_vs
        k_row0 = k_start
    l_offset = b64 * stride_lb + h64 * stride_lh + q_start

    rows = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = _load_rows(q_base, rows, stride_qs, offs_d, seqlen_q, HEADDIM, BLOCK_D, True)
    do = _load_rows(do_base, rows, stride_dos, offs_dv, seqlen_q, HEADDIM_V, BLOCK_DV, True)
    lse, delta = _load_row_stats(Lse + l_offset, Delta + l_offset, rows, seqlen_q, LOG2_SCORES)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    lo, hi, full_lo, full_hi = _key_phases(m0, seqlen_q, seqlen_k, window_left, window_right, BLOCK_M, BLOCK_N,
                                           HAS_LEFT, HAS_RIGHT)
    dq = _bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows, offs_n,
                       offs_d, offs_dv, full_lo, full_hi, seqlen_q, seqlen_k, qk_scale, score_cap, window_left,
                       window_right, False, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV,
                       BLOCK_N, DOT_PRECISION, LOG2_SCORES, USE_TMA)
    if HAS_LEFT:
        dq = _bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows,
                           offs_n, offs_d, offs_dv, lo, full_lo, seqlen_q, seqlen_k, qk_scale, score_cap, window_left,
                           window_right, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D,
                           BLOCK_DV, BLOCK_N, DOT_PRECISION, LOG2_SCORES, USE_TMA)
    dq = _bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, k_row0, head_kv, stride_ks, stride_vs, rows, offs_n,
                       offs_d, offs_dv, full_hi, hi, seqlen_q, seqlen_k, qk_scale, score_cap, window_left,
                       window_right, True, HAS_LEFT, HAS_RIGHT, HAS_SOFTCAP, HEADDIM, HEADDIM_V, BLOCK_D, BLOCK_DV,
                       BLOCK_N, DOT_PRECISION, LOG2_SCORES, USE_TMA)
    dq = dq * softmax_scale
    dq_ptrs = dQ + b64 * stride_dqb + h64 * stride_dqh + (q_start + rows)[:, None].to(tl.int64) * stride_dqs + \
        offs_d[None, :]
    tl.store(dq_ptrs, dq.to(dQ.dtype.element_ty), mask=(rows[:, None] < seqlen_q) & (offs_d[None, :] < HEADDIM))
