"""The fused FP8 quantization pass: bf16/fp16 Q, K, V -> the e4m3 operands of fa3nn.fp8.operands, in one launch.

One program owns one block of rows of one head of one of Q, K or V (program axis 1 walks Q's heads, then K's, then
V's). It reads its rows once, rotates Q and K by the recipe's Hadamard matrix (a (d, d) GEMM on the tile in
KC-column steps, so neither operand outgrows shared memory at d = 256, precision ROTATE_PRECISION; or, with
rotate_precision="fwht", a sign flip and a fast Walsh-Hadamard transform on the tile in registers), takes the
block's amax, and writes e4m3 rows (V transposed: keys contiguous, for the FP8 P·V GEMM) and the block's amax.
Three cases:

    per tile, a tile fits one program's registers (<= 128 x 256 fp32; rotated by the GEMM <= 128 x 128, see
                                  MAX_ROTATED_TILE_ELEMENTS)
                                  one pass: a block is a scale tile, its scale is computed in the program
    per tensor (delayed scaling)  one pass: the scales are given
    otherwise (per (batch, head) = CurrentScaling; per-tile at d = 256 with the GEMM rotation)
                                  two passes: block amaxes first, tile scales from them (fa3nn.fp8.scaling.
                                  amax_to_scale, on a tensor of a few KB), then the cast pass. A 16k-row scale tile
                                  cannot sit in registers, so these read Q, K, V twice (and rotate twice).

The values are fa3nn.fp8.quantize.quantize_qkv_tensors' exactly: the same fp32 multiply, saturation and
round-to-nearest-even, scale = (1 / amax) * 448 with an IEEE reciprocal (div_rn; Triton's `/` is approximate in
fp32) and descale = 1 / scale likewise. The rotation is the one exception: its fp32 sums run in another order than
torch's matmul, so rotated Q and K agree to a few fp32 ulps and an e4m3 value whose fp32 input sits that close to a
rounding midpoint can land one e4m3 step away (tests/test_fp8_triton_*.py bound both).

Triton's interpreter (TRITON_INTERPRET=1) converts fp32 to e4m3 by truncation, not round-to-nearest-even (Triton
3.9: -127.54 became -64). Under the interpreter the kernel therefore rounds onto e4m3's grid in fp32 arithmetic
first (SOFTWARE_CAST); the GPU uses the hardware cvt.rn.satfinite, and the GPU tests compare it bitwise.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fa3nn.backends.triton.configs import next_power_of_2
from fa3nn.fp8.operands import VT_PAD, FP8Operands, padded_keys, vt_columns, vt_starts
from fa3nn.fp8.scaling import E4M3, amax_to_scale, num_tiles

E4M3_MAX = tl.constexpr(448.0)
# The most fp32 elements one program holds as its scale tile: 128 rows x 256 dims unrotated (64 registers/thread at
# 16 warps). Rotated, the GEMM's operands need room too: ptxas (Triton 3.9, sm_90a) failed register allocation for
# a rotated 128 x 256 tile and spilled 432 bytes at 128 x 128 (tf32x3), so rotated tiles stop at 128 x 128 and
# d = 256 takes the two-pass path. The FWHT rotation needs no operands beside the tile: its limit is the unrotated one.
MAX_TILE_ELEMENTS = 128 * 256
MAX_ROTATED_TILE_ELEMENTS = 128 * 128
CHUNK_ROWS = 64  # rows per program when a scale tile is larger than that, or the scales are given
# The rotation GEMM's precision. "tf32x3" (3 tf32 tensor-core products, hi*hi + hi*lo + lo*hi) is fp32-accurate
# here: bf16/fp16 inputs are exact in tf32, the matrix is carried to 22 of fp32's 24 bits, sums are fp32. "ieee"
# (fp32 FMA products) is the PyTorch definition's arithmetic but not usable at d = 256: Triton's FMA dot of a
# rotated 128 x 256 tile compiled for 10 minutes and spilled 300 KB (64 x 256: 9 KB).
# Infinite inputs: a rotated row holding +-Inf comes out as PyTorch's fp32 rotation gives it, in tf32x3 and fwht alike
# (one Inf: +-Inf in every column, saturated to +-448; two: NaN where their rotated signs cancel), the tile at scale
# 1 (H100, Triton 3.6, tests/test_fp8_triton_gpu.py::test_quantize_rotated_infinities; an earlier comment here said
# tf32x3's hi / lo split made the whole row NaN, which the GPU does not do).
# The default: "fwht" (below). H200, 2026-11-30 16:37 UTC, d128 16k tokens (Q, K, V; scripts/bench_fp8_quant.py):
# 0.132 ms against tf32x3's 0.663 ms and 0.103 ms unrotated; against the fp64 rotation 4.4e-6 / 3.2e-6 of the e4m3
# values changed (fwht / tf32x3), descales within 2.3e-7 / 3.4e-7 relative. 2026-12-01 (192-row K/V tiles, after
# the clamp, NaN-check and Vᵀ-store changes noted below): 0.122-0.127 ms rotated, 0.098 unrotated at d128 (were
# 0.148-0.154 / 0.114-0.120); d256 0.176-0.181 / 0.122, unchanged (results/quantab-h200-20261201-1802/).
ROTATE_PRECISION = "fwht"
# "fwht" is no GEMM: a sign flip and a fast Walsh-Hadamard transform, log2(d) stages of fp32 adds on the register
# tile (d log d adds per row against the GEMM's d^2 multiply-adds, three times over in tf32x3). It needs d to be a
# power of two and R to be fa3nn.fp8.hadamard's diag(signs) H / sqrt(d); other head dims (96, 192: block-diagonal
# R) take the GEMM in FWHT_FALLBACK. Accuracy against the fp64 rotation: log2(d) fp32 roundings per output.
ROTATE_PRECISIONS = ("tf32x3", "ieee", "fwht")
FWHT_FALLBACK = "tf32x3"


@triton.jit
def _round_to_e4m3_grid(x):
    """Round-to-nearest-even onto e4m3's grid in fp32 arithmetic (|x| <= 448 already): the spacing in the binade of
    x is 2^(e - 3), subnormals share the smallest normal binade's 2^-9; the sign is copied back bitwise so -0 stays
    -0. Only for the interpreter, whose own cast truncates."""
    bits = x.to(tl.int32, bitcast=True)
    sign = bits & -2147483648
    magnitude = tl.abs(x)
    exponent = tl.maximum(((magnitude.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
    inv_spacing = ((3 - exponent + 127) << 23).to(tl.float32, bitcast=True)
    spacing = ((exponent - 3 + 127) << 23).to(tl.float32, bitcast=True)
    steps = magnitude * inv_spacing  # exact: a power-of-two scaling, < 16
    steps = (steps + 12582912.0) - 12582912.0  # + 1.5 * 2^23: fp32 addition rounds to an integer, ties to even
    rounded = (steps * spacing).to(tl.int32, bitcast=True) | sign
    return rounded.to(tl.float32, bitcast=True)


@triton.jit
def _to_e4m3(x, SOFTWARE_CAST: tl.constexpr):
    """Saturating round-to-nearest-even cast, NaN kept: fa3nn.fp8.scaling.saturated_cast after its multiply. On the
    GPU the cast alone is that: Triton lowers fp32 -> float8e4nv to cvt.rn.satfinite.e4m3x2.f32 (+-Inf and finite
    overflow to +-448, NaN to NaN; checked in the PTX of Triton 3.6 and 3.9, and by
    tests/test_quantize_offline_compile.py), so the explicit clamp is only the interpreter's. On the GPU it was a
    max.NaN and a min.NaN per element (256 + 256 PTX instructions per thread at d128, where the whole pass was
    5776 SASS instructions)."""
    if SOFTWARE_CAST:
        x = tl.minimum(tl.maximum(x, -E4M3_MAX, propagate_nan=tl.PropagateNan.ALL), E4M3_MAX,
                       propagate_nan=tl.PropagateNan.ALL)
        x = _round_to_e4m3_grid(x)
    return x.to(tl.float8e4nv)


@triton.jit
def _butterfly(x, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr):
    """One stage of the fast Walsh-Hadamard transform on each row: elements i and i + HALF (bit HALF of i clear)
    become their sum and their difference. The pair is axis 2 of a (ROWS, BLOCK_D / 2 HALF, 2, HALF) view; tl.flip
    swaps it (an xor reduction that folds to the partner's register, or one shuffle across lanes) and each element
    becomes partner +- itself: one add, one rounding, no select."""
    pairs = tl.reshape(x, [ROWS, BLOCK_D // (2 * HALF), 2, HALF])
    partner = tl.flip(pairs, 2)
    sign = tl.where(tl.arange(0, 2) == 1, -1.0, 1.0)[None, None, :, None]
    return tl.reshape(pairs * sign + partner, [ROWS, BLOCK_D])  # exact product: FFMA or FMUL + FADD round alike


@triton.jit
def _walsh_hadamard(x, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, LOG2_D: tl.constexpr):
    """x @ H on each row of the (ROWS, BLOCK_D) fp32 tile, H the Sylvester Hadamard matrix of +-1 (unnormalized):
    LOG2_D butterfly stages, one fp32 add per element each. Written as reshapes of the register tile so that no
    stage moves data between layouts. Measured offline (Triton 3.9, sm_90a, d128, both rotated branches): a
    split/permute/join form took 939 SHFL and 760 shared-memory accesses through 64 KB of shared memory; two sums
    over the pair (sum, difference) 768 SHFL + 1152 FADD + 384 FSEL; this form 384 SHFL and 896 FADD/FFMA, one
    per element per stage."""
    for stage in tl.static_range(LOG2_D):
        x = _butterfly(x, ROWS, BLOCK_D, 1 << stage)
    return x


@triton.jit
def _load_tile(src, rows, row_ok, stride_s, rotation, HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr,
               ROWS: tl.constexpr, ROTATE: tl.constexpr, KC: tl.constexpr, PRECISION: tl.constexpr,
               FWHT: tl.constexpr, LOG2_D: tl.constexpr):
    """(ROWS, BLOCK_D) fp32 rows of one head, rotated (x @ rotation) when ROTATE; masked rows and columns are 0.
    FWHT (HEADDIM = BLOCK_D, a power of two): rotation = diag(s) H / sqrt(d) (fa3nn.fp8.hadamard), whose first
    column is s / sqrt(d) since H's is all ones; the rows are scaled by it and go through the fast Walsh-Hadamard
    transform instead of the GEMM."""
    offs_d = tl.arange(0, BLOCK_D)
    if ROTATE and FWHT:
        x = tl.load(src + rows[:, None] * stride_s + offs_d[None, :], mask=row_ok[:, None], other=0.0)
        signs = tl.load(rotation + offs_d * HEADDIM)  # column 0: +-1 / sqrt(d)
        return _walsh_hadamard(x.to(tl.float32) * signs[None, :], ROWS, BLOCK_D, LOG2_D)
    elif ROTATE:
        acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
        offs_k = tl.arange(0, KC)
        for k0 in tl.static_range(0, BLOCK_D, KC):
            cols = k0 + offs_k
            x = tl.load(src + rows[:, None] * stride_s + cols[None, :],
                        mask=row_ok[:, None] & (cols[None, :] < HEADDIM), other=0.0).to(tl.float32)
            r = tl.load(rotation + cols[:, None] * HEADDIM + offs_d[None, :],
                        mask=(cols[:, None] < HEADDIM) & (offs_d[None, :] < HEADDIM), other=0.0)
            acc = tl.dot(x, r, acc, input_precision=PRECISION)
        return acc
    else:
        return tl.load(src + rows[:, None] * stride_s + offs_d[None, :],
                       mask=row_ok[:, None] & (offs_d[None, :] < HEADDIM), other=0.0).to(tl.float32)


@triton.jit
def _scale_from_amax(amax):
    """fa3nn.fp8.scaling.amax_to_scale with fallback 1.0: 448 / amax, or 1 where amax is 0, NaN, Inf or so small
    that the scale overflows. PyTorch evaluates `python_float / tensor` as reciprocal(tensor) * python_float (two
    roundings; a plain 448 / amax differs in the last bit for ~20% of amaxes), so this does the same."""
    bad = (amax != amax) | (amax <= 0.0) | (amax == float("inf"))
    scale = tl.math.div_rn(1.0, tl.where(bad, 1.0, amax)) * E4M3_MAX
    return tl.where(bad | (scale == float("inf")), 1.0, scale)


@triton.jit
def _max_keep_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _block_part(rotation, block, part0, rows_per_block, seqlen, src, stride_xs,
                HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, ROTATE: tl.constexpr,
                TRANSPOSE: tl.constexpr, KC: tl.constexpr, PRECISION: tl.constexpr, FWHT: tl.constexpr,
                LOG2_D: tl.constexpr, SOFTWARE_CAST: tl.constexpr):
    """Rows [part0, part0 + ROWS) of the block, as (columns, rows, row_ok, fp32 values, amax)."""
    columns = part0 + tl.arange(0, ROWS)
    # V (TRANSPOSE): tile row j is the key that Vᵀ column block * rows_per_block + j holds (16-key group order,
    # fa3nn.fp8.operands), so the transposed store below writes contiguous columns. Blocks and parts start at
    # multiples of 16 rows (quantize_fused requires block_k = 0 or a multiple of 16; with 0 a sequence is one
    # block, at row 0), so the permutation stays inside the part and the part holds the same rows.
    in_block = _vt_key_of_column(columns) if TRANSPOSE else columns
    rows = block * rows_per_block + in_block
    row_ok = (in_block < rows_per_block) & (rows < seqlen)
    y = _load_tile(src, rows, row_ok, stride_xs, rotation, HEADDIM, BLOCK_D, ROWS, ROTATE, KC, PRECISION, FWHT,
                   LOG2_D)
    # NaN if any element is NaN, as torch's amax (tl.max drops NaN). On the GPU one max.NaN per element; the
    # separate isnan reduction beside tl.max cost ~3 more instructions per element (setp.nan, selp, max.s32). The
    # interpreter runs a custom-combine reduction ~1.5x slower than tl.max (one quantize call at 2 x 300 x 2 x 64:
    # 66 s against 44), so under it (SOFTWARE_CAST) the two-reduction form stays: same values.
    if SOFTWARE_CAST:
        amax = tl.max(tl.max(tl.abs(y), 1), 0)
        amax = tl.where(tl.max(tl.max((y != y).to(tl.int32), 1), 0) > 0, float("nan"), amax)
    else:
        amax = tl.reduce(tl.reduce(tl.abs(y), 1, _max_keep_nan), 0, _max_keep_nan)
    return columns, rows, row_ok, y, amax


@triton.jit
def _store_part(dst, columns, rows, row_ok, y, scale, block, rows_per_block, seqlen, out_start, stride_os,
                HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr, TRANSPOSE: tl.constexpr, SOFTWARE_CAST: tl.constexpr):
    x8 = _to_e4m3(y * scale, SOFTWARE_CAST)
    offs_d = tl.arange(0, BLOCK_D)
    if TRANSPOSE:  # (dim, keys): stride_os is the dim stride here, keys are contiguous
        # Whole 16-column groups, so that Triton can store 16 e4m3 bytes per instruction (with the per-key mask of
        # the permuted rows, and a first column it could not prove aligned, every thread stored its Vᵀ bytes one
        # st.global.b8 at a time: 96 per thread at d128). Allowed because the block's first column is a multiple of
        # 16 (out_start is 0 or a 16-aligned vt_starts entry; rows_per_block is a multiple of 16, or there is one
        # block per sequence, block 0), the permutation stays inside a group, and the group's columns past the
        # sequence's keys hold zeros in vt8 (fa3nn.fp8.operands), which is what y holds there (masked loads).
        # (The hint is on the column vector: on the scalar, CSE merged it into _block_part's identical, unhinted
        # product and it was lost.)
        out_columns = tl.multiple_of(out_start + block * rows_per_block + columns, 16)
        written = tl.minimum(rows_per_block, seqlen - block * rows_per_block)
        written = (written + 15) // 16 * 16
        ptrs = dst + offs_d[:, None] * stride_os + out_columns[None, :]
        tl.store(ptrs, tl.trans(x8), mask=(columns[None, :] < written) & (offs_d[:, None] < HEADDIM))
    else:
        ptrs = dst + (out_start + rows)[:, None].to(tl.int64) * stride_os + offs_d[None, :]
        tl.store(ptrs, x8, mask=row_ok[:, None] & (offs_d[None, :] < HEADDIM))


@triton.jit
def _quantize_block(X, X8, Scale, Descale, BlockAmax, rotation, block, head, batch, seq_start, out_start, seqlen,
                    nblocks, rows_per_block, amax_offset, stride_xb, stride_xs, stride_xh, stride_ob, stride_os,
                    stride_oh,
                    HEADDIM: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, ROWS2: tl.constexpr,
                    ROTATE: tl.constexpr, TRANSPOSE: tl.constexpr, OWN_SCALE: tl.constexpr, STORE: tl.constexpr,
                    KC: tl.constexpr, PRECISION: tl.constexpr, FWHT: tl.constexpr, LOG2_D: tl.constexpr,
                    SOFTWARE_CAST: tl.constexpr):
    """Rows [block * rows_per_block, +rows_per_block) of one head, in a part of ROWS rows and (ROWS2 > 0) a second
    of ROWS2 rows after it: a 192-row block is 128 + 64 rows, not a 256-row tile with 64 masked rows (which, with
    the 16 warps a 256-row tile needs for the whole launch, took the pass from 0.134 to 0.20-0.25 ms at head dim 128
    on the H200), and a 256-row block 128 + 128 (_parts). Writes the block's amax; with OWN_SCALE the block is a
    scale tile (its descale goes to Descale[batch, head, block]), else its scale is read from Scale (laid out like
    BlockAmax); with STORE the e4m3 rows (TRANSPOSE: as (dim, keys) with keys contiguous). The rows are read from row
    seq_start of X and written from row (TRANSPOSE: column) out_start of X8."""
    if block >= nblocks:  # (each launch's grid is its tensor's blocks; kept for a grid that covers more)
        tl.store(BlockAmax + amax_offset, 0.0)
        return
    src = X + batch.to(tl.int64) * stride_xb + head.to(tl.int64) * stride_xh + seq_start.to(tl.int64) * stride_xs
    columns, rows, row_ok, y, amax = _block_part(
        rotation, block, 0, rows_per_block, seqlen, src, stride_xs, HEADDIM, BLOCK_D, ROWS, ROTATE, TRANSPOSE, KC,
        PRECISION, FWHT, LOG2_D, SOFTWARE_CAST)
    if ROWS2 > 0:
        columns2, rows2, row_ok2, y2, amax2 = _block_part(
            rotation, block, ROWS, rows_per_block, seqlen, src, stride_xs, HEADDIM, BLOCK_D, ROWS2, ROTATE,
            TRANSPOSE, KC, PRECISION, FWHT, LOG2_D, SOFTWARE_CAST)
        amax = _max_keep_nan(amax, amax2)
    tl.store(BlockAmax + amax_offset, amax)
    if OWN_SCALE:
        scale = _scale_from_amax(amax)
        tl.store(Descale + block, tl.math.div_rn(1.0, scale))
    else:
        scale = tl.load(Scale + amax_offset)
    if STORE:
        dst = X8 + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
        _store_part(dst, columns, rows, row_ok, y, scale, block, rows_per_block, seqlen, out_start, stride_os,
                    HEADDIM, BLOCK_D, TRANSPOSE, SOFTWARE_CAST)
        if ROWS2 > 0:
            _store_part(dst, columns2, rows2, row_ok2, y2, scale, block, rows_per_block, seqlen, out_start,
                        stride_os, HEADDIM, BLOCK_D, TRANSPOSE, SOFTWARE_CAST)


@triton.jit
def _seq(cu_seqlens, batch, seqlen_dense, IS_VARLEN: tl.constexpr):
    if IS_VARLEN:
        start = tl.load(cu_seqlens + batch)
        return start, tl.load(cu_seqlens + batch + 1) - start
    else:
        return tl.zeros([], dtype=tl.int32), seqlen_dense


@triton.jit
def _vt_key_of_column(columns):
    """The key stored at each vt8 column (both counted from the sequence's start): the inverse of
    fa3nn.fp8.operands.vt_group_column, column 16g + 4q + j holding key 16g + 2q + (j & 1) + 8 (j >> 1). The Triton
    code reads and writes Vᵀ at contiguous columns and permutes the rows it pairs them with (V rows in the pass, K
    rows in the FP8 forward): with the permutation in the pass's V store addresses, Triton 3.6 compiled the pass to
    8544 SASS instructions instead of 6936 (6944 this way) and it took 0.58-0.66 ms on the H200; this way 0.131-0.135
    ms at head dim 128 (2026-12-01, benchmarks/results/quantcheck-h200-20261201-0645/)."""
    return (columns // 16) * 16 + ((columns % 16) // 4) * 2 + (columns % 2) + ((columns // 2) % 2) * 8


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k", "rows_q", "rows_k", "nblocks_q", "nblocks_k", "amax_blocks"])
def _quantize_qkv_kernel(
    Q, K, V, Q8, K8, VT8, Rotation, Scale, DescaleQ, DescaleK, DescaleV, BlockAmax, cu_seqlens_q, cu_seqlens_k,
    vt_starts, stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_q8b, stride_q8s, stride_q8h, stride_k8b, stride_k8s, stride_k8h, stride_vtb, stride_vth, stride_vtd,
    stride_dqb, stride_dqh, stride_dkb, stride_dkh,
    seqlen_q, seqlen_k, nheads, nheads_kv, rows_q, rows_k, nblocks_q, nblocks_k, amax_blocks,
    Q_LAUNCH: tl.constexpr,
    HEADDIM: tl.constexpr, HEADDIM_V: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    ROWS_Q: tl.constexpr, ROWS_K: tl.constexpr, ROWS2_Q: tl.constexpr, ROWS2_K: tl.constexpr,
    ROTATE: tl.constexpr, OWN_SCALE: tl.constexpr,
    STORE: tl.constexpr, IS_VARLEN: tl.constexpr, KC: tl.constexpr, PRECISION: tl.constexpr, FWHT: tl.constexpr,
    LOG2_D: tl.constexpr, SOFTWARE_CAST: tl.constexpr,
):
    """Q_LAUNCH: grid (Q's row blocks, nheads, batch), Q alone; else (K/V row blocks, 2 * nheads_kv, batch), K and V.
    Program axis 1 picks the head (and for K/V the tensor): the two launches compile apart, so each gets its own
    registers and warps (quantize_fused, _num_warps). BlockAmax is (batch, nheads + 2 * nheads_kv, amax_blocks) for
    both. The descale tensors of K and V share one layout (stride_dk*). Varlen: sequence b's keys go to Vᵀ columns
    vt_starts[b].. (fa3nn.fp8.operands: 16-aligned starts), its rows of Q and K to rows cu_seqlens[b].."""
    block = tl.program_id(0)
    if Q_LAUNCH:
        slot = tl.program_id(1)
    else:
        slot = tl.program_id(1) + nheads
    batch = tl.program_id(2)
    amax_offset = (batch * (nheads + 2 * nheads_kv) + slot) * amax_blocks + block
    if Q_LAUNCH:
        start, seqlen = _seq(cu_seqlens_q, batch, seqlen_q, IS_VARLEN)
        _quantize_block(Q, Q8, Scale, DescaleQ + batch * stride_dqb + slot * stride_dqh, BlockAmax, Rotation,
                        block, slot, batch, start, start, seqlen, nblocks_q, rows_q, amax_offset, stride_qb, stride_qs,
                        stride_qh, stride_q8b, stride_q8s, stride_q8h, HEADDIM, BLOCK_D, ROWS_Q, ROWS2_Q, ROTATE, False,
                        OWN_SCALE, STORE, KC, PRECISION, FWHT, LOG2_D, SOFTWARE_CAST)
    elif slot < nheads + nheads_kv:
        head = slot - nheads
        start, seqlen = _seq(cu_seqlens_k, batch, seqlen_k, IS_VARLEN)
        _quantize_block(K, K8, Scale, DescaleK + batch * stride_dkb + head * stride_dkh, BlockAmax, Rotation,
                        block, head, batch, start, start, seqlen, nblocks_k, rows_k, amax_offset, stride_kb, stride_ks,
                        stride_kh, stride_k8b, stride_k8s, stride_k8h, HEADDIM, BLOCK_D, ROWS_K, ROWS2_K, ROTATE, False,
                        OWN_SCALE, STORE, KC, PRECISION, FWHT, LOG2_D, SOFTWARE_CAST)
    else:
        head = slot - nheads - nheads_kv
        start, seqlen = _seq(cu_seqlens_k, batch, seqlen_k, IS_VARLEN)
        column = tl.load(vt_starts + batch) if IS_VARLEN else start
        _quantize_block(V, VT8, Scale, DescaleV + batch * stride_dkb + head * stride_dkh, BlockAmax, Rotation,
                        block, head, batch, start, column, seqlen, nblocks_k, rows_k, amax_offset, stride_vb, stride_vs,
                        stride_vh, stride_vtb, stride_vtd, stride_vth, HEADDIM_V, BLOCK_DV, ROWS_K, ROWS2_K, False,
                        True, OWN_SCALE, STORE, KC, PRECISION, FWHT, LOG2_D, SOFTWARE_CAST)


# ----------------------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------------------


def _chunk_rows(rows_per_tile: int, tiles: int) -> int:
    """Rows per program when a scale tile is not one program's: a power of two dividing the tile (tiles are
    multiples of 16 rows) so that no program straddles two tiles; any when there is one tile per sequence."""
    if tiles == 1:
        return CHUNK_ROWS
    return next(r for r in (CHUNK_ROWS, 32, 16) if rows_per_tile % r == 0)


def _num_warps(rows: int, block_d: int) -> int:
    # 2048 fp32 elements per warp: 64 registers per thread for the tile itself.
    return max(4, min(16, rows * block_d // 2048))


def _parts(rows: int) -> tuple[int, int]:
    """(ROWS, ROWS2) of a program's block of `rows` rows: 2^n + 2^(n-1) rows (192 = 128 + 64) and 256 rows (128 +
    128; the K/V tile of the d128 FP8 default) are two power-of-two parts, any other count one part rounded up to a
    power of two (rows past the block masked). A launch's warps follow its first part (_num_warps): with Q and K/V in
    one launch a 256-row part ran every program, Q's 128-row ones included, with 16 warps (d128: 0.171-0.176 ms,
    0.126-0.131 without the rotation, against 0.125 / 0.100 with 192-row tiles; kb256default-h200-20261202-0812,
    fp8table-h200-20261202-0314); as 128 + 128 in one launch 0.155-0.160 (quant256-h200-20261202-0816); as 128 + 128
    with Q in a launch of its own (127 registers there against the K/V launch's 197) 0.144 (0.115;
    quantsplit-h200-20261202-0942)."""
    high = next_power_of_2(rows) // 2
    if rows >= 48 and rows == high + high // 2:
        return high, high // 2
    if rows == 256:
        return 128, 128
    return max(16, next_power_of_2(rows)), 0


class _Plan:
    """Row blocks of one tensor: rows_per_tile (scale tile), rows_per_block (one program), blocks per tile."""

    def __init__(self, seqlen: int, block: int, own_scale: bool):
        self.rows_per_tile = block if block > 0 else max(1, seqlen)
        self.tiles = num_tiles(seqlen, self.rows_per_tile)
        if own_scale:
            self.rows_per_block = self.rows_per_tile
        else:
            self.rows_per_block = _chunk_rows(self.rows_per_tile, self.tiles)
        self.blocks_per_tile = -(-min(self.rows_per_tile, max(1, seqlen)) // self.rows_per_block)
        self.nblocks = self.tiles * self.blocks_per_tile

    @property
    def parts(self) -> tuple[int, int]:
        return _parts(self.rows_per_block)


def quantize_fused(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_q: int,
    block_k: int,
    rotation: torch.Tensor | None = None,
    tensor_scales: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    rotate_precision: str = ROTATE_PRECISION,
) -> FP8Operands:
    """fa3nn.fp8.quantize.quantize_qkv_tensors' arguments and values, in the kernels' layout (fa3nn.fp8.operands):
    dense (batch, seqlen, heads, dim) or packed (total, heads, dim) q, k, v with a last dim of stride 1."""
    if rotate_precision not in ROTATE_PRECISIONS:
        raise ValueError(f"rotate_precision {rotate_precision!r} is not one of {ROTATE_PRECISIONS}")
    if block_k < 0 or block_k % VT_PAD:
        # V's rows are read in the 16-key group order of Vᵀ (fa3nn.fp8.operands) within each program's block of
        # rows, which therefore must start at multiples of 16 (0 = one tile per sequence: one block, at 0).
        raise ValueError(f"block_k must be 0 or a positive multiple of {VT_PAD} (Vᵀ's key groups), got {block_k}")
    varlen = cu_seqlens_q is not None
    if varlen:
        batch, seqlen_q, seqlen_k = cu_seqlens_q.numel() - 1, int(max_seqlen_q), int(max_seqlen_k)
    else:
        batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    nheads, nheads_kv, headdim, headdim_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    # One scale tile per program when it fits in registers and scales come from this call's amax.
    block_d, block_dv = (max(16, next_power_of_2(d)) for d in (headdim, headdim_v))
    fwht = rotate_precision == "fwht" and block_d == headdim
    if rotate_precision == "fwht" and not fwht:
        rotate_precision = FWHT_FALLBACK
    widest = block_d if rotation is not None else max(block_d, block_dv)
    tile_rows = max(_Plan(seqlen_q, block_q, True).rows_per_tile, _Plan(seqlen_k, block_k, True).rows_per_tile)
    limit = MAX_ROTATED_TILE_ELEMENTS if rotation is not None and not fwht else MAX_TILE_ELEMENTS
    own_scale = tensor_scales is None and sum(_parts(tile_rows)) * widest <= limit
    plan_q, plan_k = _Plan(seqlen_q, block_q, own_scale), _Plan(seqlen_k, block_k, own_scale)
    slots = nheads + 2 * nheads_kv
    amax_blocks = max(plan_q.nblocks, plan_k.nblocks)
    device = q.device

    q8 = torch.empty(q.shape, dtype=E4M3, device=device)
    k8 = torch.empty(k.shape, dtype=E4M3, device=device)
    if varlen:  # sequences at 16-aligned columns, zeros between them (fa3nn.fp8.operands); programs write only keys
        starts = vt_starts(cu_seqlens_k)
        vt8 = torch.zeros(nheads_kv, headdim_v, vt_columns(k.shape[0], batch), dtype=E4M3, device=device)
    else:
        starts, keys_pad = None, padded_keys(seqlen_k)
        vt8 = torch.empty(batch, nheads_kv, headdim_v, keys_pad, dtype=E4M3, device=device)
        # The contract's zero padding: the last group's columns that no key maps to (keys are permuted inside the
        # group). The pass writes these zeros too (it stores whole 16-column groups, _store_part); zeroed here as
        # well so that the contract does not rest on that store mask alone (one small fill per call).
        if keys_pad != seqlen_k:
            vt8[..., seqlen_k // VT_PAD * VT_PAD:] = 0
    descales = [torch.empty(batch, h, p.tiles, dtype=torch.float32, device=device)
                for h, p in ((nheads, plan_q), (nheads_kv, plan_k), (nheads_kv, plan_k))]
    block_amax = torch.empty(batch, slots, amax_blocks, dtype=torch.float32, device=device)
    slices = (slice(0, nheads), slice(nheads, nheads + nheads_kv), slice(nheads + nheads_kv, slots))

    def launch(scale: torch.Tensor, own: bool, store: bool) -> None:
        """Q in one launch and K, V in another, each with the warps its own row parts need (_num_warps): in one
        launch the K/V programs' 256-row tiles (the d128 default) set 16 warps, or with two 128-row parts 199
        registers, for Q's programs too."""
        cu_q = cu_seqlens_q if varlen else q
        cu_k = cu_seqlens_k if varlen else k
        strides = []
        for x in (q, k, v, q8, k8):
            strides += [0, x.stride(0), x.stride(1)] if varlen else [x.stride(0), x.stride(1), x.stride(2)]
        strides += [0, vt8.stride(0), vt8.stride(1)] if varlen else [vt8.stride(0), vt8.stride(1), vt8.stride(2)]
        strides += [descales[0].stride(0), descales[0].stride(1), descales[1].stride(0), descales[1].stride(1)]
        for q_launch, plan, width, grid in ((True, plan_q, block_d, (plan_q.nblocks, nheads, batch)),
                                            (False, plan_k, max(block_d, block_dv), (plan_k.nblocks, 2 * nheads_kv,
                                                                                     batch))):
            _quantize_qkv_kernel[grid](
                q, k, v, q8, k8, vt8, rotation if rotation is not None else q, scale, *descales, block_amax, cu_q,
                cu_k, starts if varlen else q, *strides, seqlen_q, seqlen_k, nheads, nheads_kv,
                plan_q.rows_per_block, plan_k.rows_per_block, plan_q.nblocks, plan_k.nblocks, amax_blocks,
                Q_LAUNCH=q_launch, HEADDIM=headdim, HEADDIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv,
                ROWS_Q=plan_q.parts[0], ROWS_K=plan_k.parts[0], ROWS2_Q=plan_q.parts[1], ROWS2_K=plan_k.parts[1],
                ROTATE=rotation is not None, OWN_SCALE=own, STORE=store, IS_VARLEN=varlen,
                KC=min(block_d, 32), PRECISION="tf32x3" if fwht else rotate_precision, FWHT=fwht,
                LOG2_D=block_d.bit_length() - 1, SOFTWARE_CAST=device.type == "cpu",
                num_warps=_num_warps(plan.parts[0], width),
            )

    def per_block(scales: list[torch.Tensor]) -> torch.Tensor:
        """(batch, heads, tiles) scales of Q, K, V -> one per program, laid out like block_amax."""
        out = torch.empty_like(block_amax)
        for s, p, where in zip(scales, (plan_q, plan_k, plan_k), slices):
            expanded = s.expand(batch, where.stop - where.start, p.tiles).repeat_interleave(p.blocks_per_tile, -1)
            out[:, where, : p.nblocks] = expanded
            out[:, where, p.nblocks:] = 1.0
        return out

    if rotation is not None:
        rotation = rotation.to(device=device, dtype=torch.float32).contiguous()
    if own_scale:
        launch(block_amax, True, True)  # Scale is unused: each program computes its own
    elif tensor_scales is not None:
        tensor_scales = tensor_scales.to(device=device, dtype=torch.float32)
        scales = [tensor_scales[i].expand(batch, where.stop - where.start, 1) for i, where in enumerate(slices)]
        launch(per_block(scales), False, True)
        descales = [torch.reciprocal(s) for s in scales]
    else:
        launch(block_amax, False, False)  # amax pass: Scale is unused
        tile_amax = [block_amax[:, where, : p.nblocks].reshape(batch, where.stop - where.start, p.tiles, -1)
                     .amax(-1) for p, where in zip((plan_q, plan_k, plan_k), slices)]
        scales = [amax_to_scale(a)[0] for a in tile_amax]
        launch(per_block(scales), False, True)
        descales = [torch.reciprocal(s) for s in scales]
    amax = torch.stack([block_amax[:, where, : p.nblocks].amax()
                        for p, where in zip((plan_q, plan_k, plan_k), slices)])
    return FP8Operands(q8, k8, vt8, *descales, plan_q.rows_per_tile, plan_k.rows_per_tile, amax, starts)
