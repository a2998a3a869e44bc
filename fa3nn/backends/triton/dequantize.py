"""e4m3 rows times their per-tile descales, the recipe's rotation undone, in one pass: the backward_from="quantized"
backward's Q and K (fa3nn.fp8.backward.restore, whose PyTorch form is the definition this kernel matches).

One program takes BLOCK_R (row, head) pairs of a contiguous (rows, heads, d) e4m3 tensor (read as bytes), decodes
each byte to fp32 exactly in integer arithmetic (the same code on the GPU and under TRITON_INTERPRET=1, whose fp8
conversions are not IEEE: fa3nn.backends.triton.quantize), with a rotation multiplies the values (as fp16, exact) by
its +-1 matrix on the tensor cores with float32 accumulation, BLOCK_N output columns at a time (the matrix chunk read
from L2 per program: d x BLOCK_N x 2 bytes against BLOCK_R x d x 3 of the pass's own traffic), multiplies by the
pair's descale (times the rotation's c) in fp32 and rounds once to the output dtype. Which descale a row reads comes
from `row_base` (int64 per row: batch * heads * tiles + tile, made by fa3nn.fp8.backward from the dense shape or
cu_seqlens); the head adds head * tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

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
def _dequantize_kernel(x_ptr, row_base_ptr, descale_ptr, signs_ptr, c_ptr, out_ptr, pairs, heads, tiles,
                       D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK: tl.constexpr, BLOCK_N: tl.constexpr,
                       ROTATE: tl.constexpr):
    pair = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK_D)
    live = pair < pairs
    row = pair // heads
    head = pair - row * heads
    base = tl.load(row_base_ptr + row, mask=live, other=0)
    scale = tl.load(descale_ptr + base + head * tiles, mask=live, other=0.0)
    rows = pair.to(tl.int64)[:, None] * D
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


def dequantize_rows(x8: torch.Tensor, descale: torch.Tensor, row_base: torch.Tensor, dtype: torch.dtype,
                    signs: torch.Tensor | None = None, c: torch.Tensor | None = None) -> torch.Tensor:
    """x8: e4m3 (rows..., heads, d), contiguous; descale: float32 (batch, heads, tiles), contiguous; row_base: int64
    (rows,) with batch * heads * tiles + tile for each row; signs: None, or fp16 (d, d) rotationᵀ / c with c float32
    (1,) (fa3nn.fp8.backward._signs). Returns (x8 @ signs) * descale * c in `dtype` (without signs x8 * descale)."""
    heads, d = x8.shape[-2], x8.shape[-1]
    x8 = x8.contiguous()
    out = torch.empty(x8.shape, dtype=dtype, device=x8.device)
    pairs = x8.numel() // d
    if pairs == 0:
        return out
    rotate = signs is not None
    # at least 16 columns: the rotation's fp16 tl.dot needs K >= 16 on a GPU (Triton's NVIDIA min_dot_size; the
    # interpreter takes any), and head dims under 16 reach here through the FP8 emulation, which serves every call
    block_d = max(16, triton.next_power_of_2(d))
    grid = (triton.cdiv(pairs, BLOCK_R),)
    _dequantize_kernel[grid](x8.view(torch.uint8), row_base, descale.contiguous(), signs if rotate else descale,
                             c if rotate else descale, out, pairs, heads, descale.shape[-1], D=d,
                             BLOCK_D=block_d, BLOCK=BLOCK_R, BLOCK_N=BLOCK_N, ROTATE=rotate)
    return out
