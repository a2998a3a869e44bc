"""Row arithmetic of packed (varlen) batches: sequences laid end to end, delimited by cu_seqlens (batch + 1 offsets).

One definition for every place that maps packed rows back to their sequences (FP8 scale tiles, the packed Vᵀ
layout, kvcache tokens; the FP8 backward's restore pass searches cu_seqlens in its kernel by the same rule), computed
on the device without a host sync: searchsorted over the sequence ends, where repeat_interleave(lengths) would read
the lengths on the host.
"""

from __future__ import annotations

import torch


def sequence_positions(cu_seqlens: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 (total,) each: every packed row's sequence and its position in that sequence. Empty sequences share a
    boundary with their successor; a row is given the last sequence that starts at or before it."""
    row = torch.arange(total, device=cu_seqlens.device)
    cu = cu_seqlens.to(torch.int64)
    sequence = torch.searchsorted(cu[1:], row, right=True)
    return sequence, row - cu[sequence]


__all__ = ["sequence_positions"]
