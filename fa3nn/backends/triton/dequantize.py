"""e4m3 rows times their per-tile descales, in one pass: the backward_from="quantized" backward's Q and K
(fa3nn.fp8.backward.dequantize, whose PyTorch form is the definition this kernel matches bit for bit).

One program takes BLOCK_R (row, head) pairs of a contiguous (rows, heads, d) e4m3 tensor (read as bytes), decodes
each byte to fp32 exactly in integer arithmetic (the same code on the GPU and under TRITON_INTERPRET=1, whose fp8
conversions are not IEEE: fa3nn.backends.triton.quantize), multiplies by the pair's descale in fp32 and rounds once
to the output dtype. Which descale a row reads comes from `row_base` (int64 per row: batch * heads * tiles + tile, made
by fa3nn.fp8.backward from the dense shape or cu_seqlens); the head adds head * tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_R = 32  # (row, head) pairs per program: 32 x 128 bytes in, 8 KB out at d128


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
def _dequantize_kernel(x_ptr, row_base_ptr, descale_ptr, out_ptr, pairs, heads, tiles, D: tl.constexpr,
                       BLOCK_D: tl.constexpr, BLOCK: tl.constexpr):
    pair = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK_D)
    live = pair < pairs
    row = pair // heads
    head = pair - row * heads
    base = tl.load(row_base_ptr + row, mask=live, other=0)
    scale = tl.load(descale_ptr + base + head * tiles, mask=live, other=0.0)
    offsets = pair.to(tl.int64)[:, None] * D + cols[None, :]
    mask = live[:, None] & (cols[None, :] < D)
    bits = tl.load(x_ptr + offsets, mask=mask, other=0).to(tl.int32)
    value = _e4m3_to_fp32(bits) * scale[:, None]
    tl.store(out_ptr + offsets, value.to(out_ptr.dtype.element_ty), mask=mask)


def dequantize_rows(x8: torch.Tensor, descale: torch.Tensor, row_base: torch.Tensor,
                    dtype: torch.dtype) -> torch.Tensor:
    """x8: e4m3 (rows..., heads, d), contiguous; descale: float32 (batch, heads, tiles), contiguous; row_base: int64
    (rows,) with batch * heads * tiles + tile for each row. Returns x8 * descale in `dtype`."""
    heads, d = x8.shape[-2], x8.shape[-1]
    x8 = x8.contiguous()
    out = torch.empty(x8.shape, dtype=dtype, device=x8.device)
    pairs = x8.numel() // d
    if pairs == 0:
        return out
    grid = (triton.cdiv(pairs, BLOCK_R),)
    _dequantize_kernel[grid](x8.view(torch.uint8), row_base, descale.contiguous(), out, pairs, heads,
                             descale.shape[-1], D=d, BLOCK_D=triton.next_power_of_2(d), BLOCK=BLOCK_R)
    return out
