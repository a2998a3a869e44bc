"""What an FP8 attention kernel reads: e4m3 Q and K in the caller's layout, e4m3 V TRANSPOSED, and float32 descales.

This layout is the contract between the fused quantization pass (fa3nn.backends.triton.quantize) and every FP8
forward kernel (Triton's and the native Hopper one). Hopper's FP8 wgmma reads its B operand K-major only; for
O = P·V the reduction runs over keys, so V is stored with keys contiguous:

    q8   e4m3  dense (batch, seqlen_q, nheads, d)       packed (total_q, nheads, d)
    k8   e4m3  dense (batch, seqlen_k, nheads_kv, d)    packed (total_k, nheads_kv, d)
    vt8  e4m3  dense (batch, nheads_kv, dv, seqlen_k_pad)  packed (nheads_kv, dv, total_k_pad), contiguous;
               seqlen_k_pad = ceil(seqlen_k / 16) * 16 (total_k_pad likewise), the padding columns are zero, and a
               packed sequence's keys sit at its cu_seqlens_k offsets (no padding between sequences)
    q_descale, k_descale, v_descale  float32 (batch, nheads or nheads_kv, tiles): fa3nn.fp8.scaling's layout, with
               block_q / block_k rows per tile (>= the longest sequence when there is one scale per (batch, head))
    amax float32 (3,): the per-tensor amax of Q, K (as rotated) and V, which delayed scaling records.

`to_operands` builds them from the PyTorch quantization (fa3nn.fp8.quantize), so a kernel can be tested against the
same numbers on any device; `v_from_vt` undoes the transpose.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.fp8.quantize import QuantizedQKV

VT_PAD = 16  # keys per FP8 wgmma K step (32 bytes of e4m3 = 16 keys is the smallest TMA-friendly row multiple)


def padded_keys(seqlen_or_total: int) -> int:
    """Columns of vt8: the key count rounded up to a multiple of VT_PAD."""
    return -(-seqlen_or_total // VT_PAD) * VT_PAD


@dataclass(frozen=True)
class FP8Operands:
    q: torch.Tensor
    k: torch.Tensor
    vt: torch.Tensor
    q_descale: torch.Tensor
    k_descale: torch.Tensor
    v_descale: torch.Tensor
    block_q: int
    block_k: int
    amax: torch.Tensor | None = None


def transpose_v(v8: torch.Tensor, varlen: bool) -> torch.Tensor:
    """e4m3 V in the caller's layout -> vt8 (module docstring), zero-padded."""
    if varlen:
        total, nheads_kv, dv = v8.shape
        vt = torch.zeros(nheads_kv, dv, padded_keys(total), dtype=v8.dtype, device=v8.device)
        vt[..., :total] = v8.permute(1, 2, 0)
        return vt
    batch, seqlen, nheads_kv, dv = v8.shape
    vt = torch.zeros(batch, nheads_kv, dv, padded_keys(seqlen), dtype=v8.dtype, device=v8.device)
    vt[..., :seqlen] = v8.permute(0, 2, 3, 1)
    return vt


def v_from_vt(vt8: torch.Tensor, seqlen_or_total: int, varlen: bool) -> torch.Tensor:
    """The inverse of transpose_v: vt8 -> V in the caller's layout (padding dropped)."""
    if varlen:
        return vt8[..., :seqlen_or_total].permute(2, 0, 1)
    return vt8[..., :seqlen_or_total].permute(0, 3, 1, 2)


def to_operands(quantized: QuantizedQKV, varlen: bool) -> FP8Operands:
    """The PyTorch quantization's result in the kernels' layout."""
    return FP8Operands(quantized.q, quantized.k, transpose_v(quantized.v, varlen), quantized.q_descale,
                       quantized.k_descale, quantized.v_descale, quantized.block_q, quantized.block_k, quantized.amax)
