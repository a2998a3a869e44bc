"""Test inputs: fresh random q/k/v (never zeros) and padding/packing helpers for varlen tests."""

from __future__ import annotations

import torch


def random_qkv(
    batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device="cpu", headdim_v=None, requires_grad=False,
    generator=None,
):
    """q (batch, seqlen_q, nheads, d), k/v (batch, seqlen_k, nheads_kv, d[v]) drawn from N(0, 1) in `dtype`."""
    headdim_v = headdim if headdim_v is None else headdim_v

    def draw(*shape):
        t = torch.randn(*shape, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)
        return t.requires_grad_(requires_grad)

    return (
        draw(batch, seqlen_q, nheads, headdim),
        draw(batch, seqlen_k, nheads_kv, headdim),
        draw(batch, seqlen_k, nheads_kv, headdim_v),
    )


def random_padding_mask(batch, max_seqlen, device="cpu", generator=None, allow_empty=True) -> torch.Tensor:
    """Bool (batch, max_seqlen), True on real tokens, right-padded, lengths drawn uniformly (one sequence is full)."""
    low = 0 if allow_empty else 1
    lengths = torch.randint(low, max_seqlen + 1, (batch,), generator=generator)
    lengths[0] = max_seqlen
    return (torch.arange(max_seqlen).unsqueeze(0) < lengths.unsqueeze(1)).to(device)


def unpad(x: torch.Tensor, padding_mask: torch.Tensor):
    """(batch, seqlen, ...) + mask -> packed (total, ...), int32 cu_seqlens (batch + 1,), max_seqlen."""
    lengths = padding_mask.sum(-1, dtype=torch.int32)
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    return x[padding_mask], cu_seqlens, int(lengths.max().item()) if lengths.numel() else 0


def pad(packed: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    """Inverse of unpad; padded positions are zero."""
    out = packed.new_zeros(*padding_mask.shape, *packed.shape[1:])
    out[padding_mask] = packed
    return out
