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
    lengths[:1] = max_seqlen  # a slice: batch 0 gives an empty (0, max_seqlen) mask
    return (torch.arange(max_seqlen).unsqueeze(0) < lengths.unsqueeze(1)).to(device)


def as_padding_mask(padding_mask: torch.Tensor, shape: tuple[int, ...] | None = None, name: str = "padding_mask"
                    ) -> torch.Tensor:
    """The mask `name` as a bool (batch, seqlen) tensor (of `shape` where given), True on real tokens: bool, or
    integers 0 / 1 (Hugging Face's int64 attention_mask). Indexing with integers would gather rows 0 and 1 instead of
    selecting tokens, so those are converted, and anything else (floats, other values, another shape) raises."""
    if not isinstance(padding_mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool or 0/1 integer torch.Tensor, got {type(padding_mask).__name__}")
    if padding_mask.dim() != 2 or (shape is not None and tuple(padding_mask.shape) != tuple(shape)):
        expected = "(batch, seqlen)" if shape is None else f"(batch, seqlen) = {tuple(shape)}"
        raise ValueError(f"{name} must have shape {expected}, got {tuple(padding_mask.shape)}")
    if padding_mask.dtype == torch.bool:
        return padding_mask
    if padding_mask.is_floating_point() or padding_mask.is_complex():
        raise TypeError(f"{name} must be bool or 0/1 integers (True / 1 on real tokens), got {padding_mask.dtype}; "
                        f"pass {name}.bool() if its values are 0 / 1")
    if ((padding_mask != 0) & (padding_mask != 1)).any():
        raise ValueError(f"{name} of {padding_mask.dtype} must hold only 0 and 1 (1 on real tokens), got values "
                         f"{padding_mask.unique().tolist()[:8]}")
    return padding_mask.bool()


def unpad(x: torch.Tensor, padding_mask: torch.Tensor):
    """(batch, seqlen, ...) + mask (batch, seqlen), bool or 0/1 integers -> packed (total, ...), int32 cu_seqlens
    (batch + 1,), max_seqlen."""
    padding_mask = as_padding_mask(padding_mask, x.shape[:2])
    lengths = padding_mask.sum(-1, dtype=torch.int32)
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    return x[padding_mask], cu_seqlens, int(lengths.max().item()) if lengths.numel() else 0


def pad(packed: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
    """Inverse of unpad (the same mask, bool or 0/1 integers); padded positions are zero."""
    padding_mask = as_padding_mask(padding_mask)
    tokens = int(padding_mask.sum())
    if tokens != packed.shape[0]:
        raise ValueError(f"padding_mask has {tokens} real tokens but packed has {packed.shape[0]} rows; pass the mask "
                         f"that unpad packed it with")
    out = packed.new_zeros(*padding_mask.shape, *packed.shape[1:])
    out[padding_mask] = packed
    return out
