"""What an FP8 attention kernel reads: e4m3 Q and K in the caller's layout, e4m3 V TRANSPOSED, and float32 descales.

This layout is the contract between the fused quantization pass (fa3nn.backends.triton.quantize) and every FP8
forward kernel (Triton's and the native Hopper one). Hopper's FP8 wgmma reads its B operand K-major only; for
O = P·V the reduction runs over keys, so V is stored with keys contiguous:

    q8   e4m3  dense (batch, seqlen_q, nheads, d)       packed (total_q, nheads, d)
    k8   e4m3  dense (batch, seqlen_k, nheads_kv, d)    packed (total_k, nheads_kv, d)
    vt8  e4m3  dense (batch, nheads_kv, dv, seqlen_k_pad), seqlen_k_pad = ceil(seqlen_k / 16) * 16, contiguous,
               the padding columns zero.
               packed (nheads_kv, dv, vt_columns(total_k, batch)), contiguous: sequence i's keys sit at columns
               vt_starts[i] .. vt_starts[i] + ceil(len_i / 16) * 16, where vt_starts[i] = sum over j < i of
               ceil(len_j / 16) * 16, and every other column is zero (between sequences and after the last one).
               Key order: inside every group of 16 keys of a sequence (keys 16g .. 16g + 15, counted from the
               sequence's first key), key 16g + j sits at column 16g + vt_group_column(j), not 16g + j (below).
    vt_starts  int32 (batch + 1,), packed only (None for dense): vt_starts(cu_seqlens_k), computed on the device.
    q_descale, k_descale, v_descale  float32 (batch, nheads or nheads_kv, tiles): fa3nn.fp8.scaling's layout, with
               block_q / block_k rows per tile (>= the longest sequence when there is one scale per (batch, head))
    amax float32 (3,): the per-tensor amax of Q, K (as rotated) and V, which delayed scaling records.

Why every packed sequence starts at a multiple of 16 columns: the native kernel loads Vt by TMA with the key column
as the innermost coordinate, which must be a multiple of 16 bytes (16 e4m3 keys); a sequence starting anywhere else
made the load an illegal instruction on the H200 (benchmarks/NOTES.md, "Hang analysis" and "Run 3").

Why vt_starts travels as an array (FP8Operands.vt_starts) rather than being recomputed by each kernel: the pass that
writes vt8 and every kernel that reads it then use one computation of the layout, made once per forward (three tiny
device ops, no host sync); a kernel recomputing it in place would sum batch lengths per CTA (O(batch) loads in the
native producer warp, which runs on 24 registers). Why vt8 has vt_columns(total_k, batch) columns and not exactly
vt_starts[batch]: the exact count lives on the device, and allocating by it would need a host sync per call;
vt_columns is the tightest count known from shapes (reached when every length is 1 mod 16), at most 15 columns per
sequence more than the data needs.

Why keys are permuted inside groups of 16: the native kernel feeds P to the P·V wgmma from registers, and an e4m3 A
fragment register of thread q (of its quad) holds k positions 4q .. 4q + 3 while the score accumulator gives the same
thread columns 2q, 2q + 1, 8 + 2q, 9 + 2q (PTX wgmma register layouts; shared/HOPPER_PRIMER.md section 2). With Vᵀ
stored in that order the thread packs its own values; in key order it needed 16 quad shuffles and 32 byte
permutes per 128-key block, on the path from the P·V wait to the next GEMM issue (without them the d128 forward ran
7-16% faster on the H200, benchmarks/NOTES.md "2026-12-01"). The permutation stays inside 16-key groups, so the
16-aligned sequence starts and the zero padding are unchanged.

`to_operands` builds them from the PyTorch quantization (fa3nn.fp8.quantize), so a kernel can be tested against the
same numbers on any device; `v_from_vt` undoes the transpose.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.fp8.quantize import QuantizedQKV
from fa3nn.packed import sequence_positions

VT_PAD = 16  # keys per FP8 wgmma K step (32 bytes of e4m3 = 16 keys is the smallest TMA-friendly row multiple)


def vt_group_column(keys: torch.Tensor) -> torch.Tensor:
    """Column of key j (counted from its sequence's first key) with its group of VT_PAD keys kept in place:
    (j & ~15) + 4 ((j & 7) >> 1) + (j & 1) + 2 ((j >> 3) & 1). Key 2q + e (e in 0, 1) goes to column 4q + e and key
    8 + 2q + e to column 4q + 2 + e. The Triton kernels use its inverse
    (fa3nn.backends.triton.quantize._vt_key_of_column)."""
    return (keys & ~15) + 4 * ((keys & 7) >> 1) + (keys & 1) + 2 * ((keys >> 3) & 1)


def padded_keys(seqlen_or_total: int) -> int:
    """Columns of dense vt8: the key count rounded up to a multiple of VT_PAD."""
    return -(-seqlen_or_total // VT_PAD) * VT_PAD


def vt_columns(total_k: int, batch: int) -> int:
    """Columns of packed vt8 for total_k keys in `batch` sequences: enough for every sequence to start at a multiple
    of VT_PAD whatever the lengths (each start wastes at most VT_PAD - 1 columns), from shapes alone."""
    return padded_keys(total_k + (VT_PAD - 1) * batch)


def vt_starts(cu_seqlens_k: torch.Tensor) -> torch.Tensor:
    """int32 (batch + 1,) on cu_seqlens_k's device: sequence i's first column in packed vt8, the lengths rounded up to
    VT_PAD and summed (entry batch: the columns the data spans). No host sync."""
    lengths = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int64)
    padded = (lengths + VT_PAD - 1) // VT_PAD * VT_PAD
    return torch.nn.functional.pad(padded.cumsum(0), (1, 0)).to(torch.int32)


def vt_column_of_key(cu_seqlens_k: torch.Tensor, total_k: int) -> torch.Tensor:
    """int64 (total_k,): the packed vt8 column of each packed key (the group order included). No host sync
    (fa3nn.packed)."""
    sequence, position = sequence_positions(cu_seqlens_k, total_k)
    return vt_group_column(position) + vt_starts(cu_seqlens_k).to(torch.int64)[sequence]


def check_vt_starts(vt8: torch.Tensor, starts: torch.Tensor | None, cu_seqlens_k: torch.Tensor,
                    total_k: int) -> torch.Tensor:
    """What a kernel does before reading packed vt8: checks its column count (which tells this layout from the
    older one that packed sequences at cu_seqlens_k) and `starts` (FP8Operands.vt_starts), or computes the starts
    when None. Returns int32 contiguous starts. Shapes only: no host sync."""
    batch = cu_seqlens_k.numel() - 1
    if vt8.shape[-1] != vt_columns(total_k, batch):
        raise ValueError(
            f"packed vt8 has {vt8.shape[-1]} key columns; {total_k} keys in {batch} sequences need "
            f"vt_columns({total_k}, {batch}) = {vt_columns(total_k, batch)} (every sequence at a 16-aligned column; "
            f"build vt8 with fa3nn.fp8.operands.transpose_v(v8, cu_seqlens_k) or the fused quantization pass)"
        )
    if starts is None:
        return vt_starts(cu_seqlens_k)
    if starts.dtype != torch.int32 or starts.shape != (batch + 1,) or starts.device != cu_seqlens_k.device:
        raise ValueError(
            f"vt_starts must be int32 ({batch + 1},) on {cu_seqlens_k.device} (fa3nn.fp8.operands.vt_starts("
            f"cu_seqlens_k)), got {starts.dtype} {tuple(starts.shape)} on {starts.device}"
        )
    return starts.contiguous()


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
    vt_starts: torch.Tensor | None = None  # packed batches only (module docstring)


def transpose_v(v8: torch.Tensor, cu_seqlens_k: torch.Tensor | None = None) -> torch.Tensor:
    """e4m3 V in the caller's layout -> vt8 (module docstring), zero-padded; packed when cu_seqlens_k is given."""
    if cu_seqlens_k is not None:
        total, nheads_kv, dv = v8.shape
        vt = torch.zeros(nheads_kv, dv, vt_columns(total, cu_seqlens_k.numel() - 1), dtype=v8.dtype,
                         device=v8.device)
        vt[..., vt_column_of_key(cu_seqlens_k, total)] = v8.permute(1, 2, 0)
        return vt
    batch, seqlen, nheads_kv, dv = v8.shape
    vt = torch.zeros(batch, nheads_kv, dv, padded_keys(seqlen), dtype=v8.dtype, device=v8.device)
    vt[..., vt_group_column(torch.arange(seqlen, device=v8.device))] = v8.permute(0, 2, 3, 1)
    return vt


def v_from_vt(vt8: torch.Tensor, seqlen_or_total: int, cu_seqlens_k: torch.Tensor | None = None) -> torch.Tensor:
    """The inverse of transpose_v: vt8 -> V in the caller's layout (padding dropped)."""
    if cu_seqlens_k is not None:
        return vt8[..., vt_column_of_key(cu_seqlens_k, seqlen_or_total)].permute(2, 0, 1)
    return vt8[..., vt_group_column(torch.arange(seqlen_or_total, device=vt8.device))].permute(0, 3, 1, 2)


def to_operands(quantized: QuantizedQKV, cu_seqlens_k: torch.Tensor | None = None) -> FP8Operands:
    """The PyTorch quantization's result in the kernels' layout (packed when cu_seqlens_k is given)."""
    starts = None if cu_seqlens_k is None else vt_starts(cu_seqlens_k)
    return FP8Operands(quantized.q, quantized.k, transpose_v(quantized.v, cu_seqlens_k), quantized.q_descale,
                       quantized.k_descale, quantized.v_descale, quantized.block_q, quantized.block_k, quantized.amax,
                       starts)
