"""e4m3 rows times their per-tile descales, the recipe's rotation undone, in one pass: the backward_from="quantized"
backward's Q and K (fa3nn.fp8.backward.restore, whose PyTorch form is the definition this kernel matches).

One program takes BLOCK_R (row, head) pairs of a contiguous (rows, heads, d) e4m3 tensor (read as bytes), decodes
each byte to fp32 exactly in integer arithmetic (the same code on the GPU and under TRITON_INTERPRET=1, whose fp8
conversions are not IEEE: fa3nn.backends.triton.quantize), with a rotation multiplies the values (as fp16, exact) by
its +-1 matrix on the tensor cores with float32 accumulation, BLOCK_N output columns at a time (the matrix chunk read
from L2 per program: d x BLOCK_N x 2 bytes against BLOCK_R x d x 3 of the pass's own traffic), multiplies by the
pair's descale (times the rotation's c) in fp32 and rounds once to the output dtype. Which descale a row reads comes
from the row itself: dense rows are batch-major, a packed row's sequence comes from a binary search over cu_seqlens
in the kernel (_descale_offset); no per-row tensor is made on the host (s48b: the small launches that made one cost
more host time than the pass's kernel time).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fa3nn.backends.triton.configs import next_power_of_2

BLOCK_R = 64  # (row, head) pairs per program: 64 x 128 bytes in, 16 KB out at d128; tl.dot wants >= 16 rows
BLOCK_N = 64  # output columns per product with the rotation's +-1 matrix


@triton.jit
def _e4m3_to_fp32(bits):
    """e4m3 bytes (int32, 0..255) -> their exact fp32 values: sign, 4 exponent bits (bias 7), 3 mantissa bits;
    exponent 0 is subnormal (mantissa * 2^-9); exponent 15 with mantissa 7 is NaN (e4m3fn has no Inf)."""
    sign = (bits & 0x80) << 24
    exponent = (bits >> 3) & 0xF
    mantissa = bits & 0x7
    normal = ((exponent + 120) << 23) | (mantissa << 20)
    subnormal = (mantissa.to(tl.float32) * 0.001953125).to(tl.int32, bitcast=True)
    magnitude = tl.where(exponent == 0, subnormal, normal)
    magnitude = tl.where((exponent == 15) & (mantissa == 7), 0x7FC00000, magnitude)
    return (magnitude | sign).to(tl.float32, bitcast=True)


@triton.jit
def _descale_offset(row, cu_ptr, seqlen, batch, block, heads, tiles, search_steps, VARLEN: tl.constexpr):
    """The offset of (row's batch, head 0, row's tile) in a contiguous (batch, heads, tiles) descale tensor. Dense
    rows are batch-major, `seqlen` each; a packed row belongs to the last sequence starting at or before it
    (fa3nn.packed.sequence_positions' rule: an empty sequence shares its successor's start), found by a binary
    search over cu_seqlens (`search_steps` = the batch's bit length) on the device: no row tensor, no host sync."""
    if VARLEN:
        lo = tl.zeros_like(row)  # cu[lo] <= row; the sequence is below hi
        hi = lo + batch
        for _ in range(search_steps):
            mid = (lo + hi) // 2
            at_or_before = tl.load(cu_ptr + mid).to(tl.int64) <= row
            lo = tl.where(at_or_before, mid, lo)
            hi = tl.where(at_or_before, hi, mid)
        sequence = lo
        position = row - tl.load(cu_ptr + lo).to(tl.int64)
    else:
        sequence = row // seqlen
        position = row - sequence * seqlen
    return sequence * heads * tiles + position // block


@triton.jit
def _dequantize_kernel(x_ptr, cu_ptr, descale_ptr, signs_ptr, c_ptr, out_ptr, pairs, seqlen, batch, block, heads,
                       tiles, search_steps, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK: tl.constexpr,
                       BLOCK_N: tl.constexpr, ROTATE: tl.constexpr, VARLEN: tl.constexpr):
    pair = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK_D)
    live = pair < pairs
    row = pair // heads
    head = pair - row * heads
    base = _descale_offset(tl.where(live, row, 0), cu_ptr, seqlen, batch, block, heads, tiles, search_steps, VARLEN)
    scale = tl.load(descale_ptr + base + head * tiles, mask=live, other=0.0)
    rows = pair[:, None] * D
    bits = tl.load(x_ptr + rows + cols[None, :], mask=live[:, None] & (cols[None, :] < D), other=0).to(tl.int32)
    values = _e4m3_to_fp32(bits)
    if ROTATE:
        scale = scale * tl.load(c_ptr)
        values = values.to(tl.float16)  # exact: every e4m3 value is an fp16 value
        for n in tl.static_range(0, BLOCK_D, BLOCK_N):
            out_cols = n + tl.arange(0, BLOCK_N)
            signs = tl.load(signs_ptr + cols[:, None] * D + out_cols[None, :],
                            mask=(cols[:, None] < D) & (out_cols[None, :] < D), other=0.0)
            value = tl.dot(values, signs) * scale[:, None]
            tl.store(out_ptr + rows + out_cols[None, :], value.to(out_ptr.dtype.element_ty),
                     mask=live[:, None] & (out_cols[None, :] < D))
    else:
        value = values * scale[:, None]
        tl.store(out_ptr + rows + cols[None, :], value.to(out_ptr.dtype.element_ty),
                 mask=live[:, None] & (cols[None, :] < D))


def dequantize_rows(x8: torch.Tensor, descale: torch.Tensor, block: int, cu_seqlens: torch.Tensor | None,
                    dtype: torch.dtype, signs: torch.Tensor | None = None,
                    c: torch.Tensor | None = None) -> torch.Tensor:
    """x8: e4m3 dense (batch, seqlen, heads, d) or packed (total, heads, d) with cu_seqlens (int32, batch + 1);
    descale: float32 (batch, heads, tiles), `block` rows per tile; signs: None, or fp16 (d, d) rotationᵀ / c with c
    float32 (1,) (fa3nn.fp8.backward._signs). Returns (x8 @ signs) * descale * c in `dtype` (without signs
    x8 * descale), one launch."""
    heads, d = x8.shape[-2], x8.shape[-1]
    x8 = x8.contiguous()
    out = torch.empty(x8.shape, dtype=dtype, device=x8.device)
    pairs = x8.numel() // d
    if pairs == 0:
        return out
    varlen = cu_seqlens is not None
    batch = cu_seqlens.numel() - 1 if varlen else x8.shape[0]
    rotate = signs is not None
    # at least 16 columns: the rotation's fp16 tl.dot needs K >= 16 on a GPU (Triton's NVIDIA min_dot_size; the
    # interpreter takes any), and head dims under 16 reach here through the FP8 emulation, which serves every call
    block_d = max(16, next_power_of_2(d))
    grid = (triton.cdiv(pairs, BLOCK_R),)
    _dequantize_kernel[grid](x8.view(torch.uint8), cu_seqlens if varlen else descale, descale.contiguous(),
                             signs if rotate else descale, c if rotate else descale, out, pairs,
                             1 if varlen else x8.shape[1], batch, block, heads, descale.shape[-1],
                             batch.bit_length(), D=d, BLOCK_D=block_d, BLOCK=BLOCK_R,
                             BLOCK_N=BLOCK_N, ROTATE=rotate, VARLEN=varlen)
    return out
