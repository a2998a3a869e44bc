"""From the ways Hugging Face models mark sequence boundaries to fa3nn's packed (varlen) layout, and back.

transformers hands an attention function one of three boundary descriptions (checked in this order, as its own
flash-attention path does):

1. a 2D padding mask (batch, seqlen_k), True on real tokens, left or right padded: unpad q/k/v to
   (total, nheads, headdim), run varlen, scatter the output back (padded query rows get zeros); or, where
   transformers' mask was more than causal / sliding over each row (packed position_ids, chunks, bidirectional
   blocks), the layout fa3nn's mask function read from it (hf_mask_probe; packed by hf_layout);
2. `cu_seq_lens_q/k` + `max_length_q/k` kwargs, as `DataCollatorWithFlattening(return_flash_attn_kwargs=True)`
   produces for sequences flattened into one row;
3. `position_ids` that restart (1, 2, 3, 0, 1, 0, 1, 2 ...): every token whose position is not above its left
   neighbour's starts a sequence. Unlike transformers' own check this also accepts batch > 1 (a sequence never
   spans two rows) and any start value (`position_ids_start`). Positions that skip ahead (0 .. 9, 30 .. 39: PoSE,
   or a sequence continued after dropped tokens) are one sequence, as transformers' flash-attention path reads
   them (sequences start at the row's smallest position) and as eager runs them whenever a padding mask or a cache
   is given; the one call where eager cuts at every step that is not + 1 (no mask, no cache) reaches fa3nn as the
   mask's layout (case 1).

Everything else is a dense call. All functions take and return the (batch, seqlen, nheads, headdim) layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fa3nn.memo import TensorMemo
from fa3nn.slots import boundary_tensor, longest, split_boundaries

# Boundaries read from a position_ids tensor or a padding mask, once per tensor: transformers passes the same one to
# every layer of a forward (fa3nn.memo says why that matters).
_boundaries = TensorMemo()
# Right-padded masks run as slots (_mask_boundaries); False unpads them like any mask (scripts/hf_varlen_step_ab.py
# times both).
RIGHT_PADDING_AS_SLOTS = True


@dataclass
class Packed:
    """q/k/v in the varlen layout, plus what it takes to put the output back into (batch, seqlen_q, ...)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int
    query_rows: torch.Tensor | None  # flat (batch * seqlen_q) indices of the real query rows; None = all rows, in order
    batch: int
    seqlen_q: int

    def restore(self, out: torch.Tensor) -> torch.Tensor:
        """(total_q, nheads, headdim_v) -> (batch, seqlen_q, nheads, headdim_v); padded query rows are zero."""
        if self.query_rows is None:
            return out.view(self.batch, self.seqlen_q, *out.shape[1:])
        full = out.new_zeros(self.batch * self.seqlen_q, *out.shape[1:])
        full.index_copy_(0, self.query_rows, out)  # differentiable in both `out` and the zero background
        return full.view(self.batch, self.seqlen_q, *out.shape[1:])


def hf_window(is_causal: bool, sliding_window: int | None, seqlen_k: int) -> tuple[int, int]:
    """fa3nn's window_size for a transformers layer's sliding_window, which counts the query token itself: key j is
    seen by query i when i - sliding_window < j <= i, i.e. (sliding_window - 1, 0) (symmetric when not causal)."""
    if sliding_window is None or sliding_window <= 0 or seqlen_k <= sliding_window - 1:
        return (-1, -1)
    return (sliding_window - 1, -1 if is_causal else sliding_window - 1)


def _cu_seqlens(lengths: torch.Tensor) -> torch.Tensor:
    return F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))


def _flatten(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def unpad_by_mask(q, k, v, padding_mask: torch.Tensor) -> Packed:
    """Case 1. `padding_mask` (batch, seqlen_k) is True on real tokens. seqlen_q may be shorter than seqlen_k (decoding
    with a cache): the query rows are then the last seqlen_q columns of the mask, as in transformers."""
    batch, seqlen_q = q.shape[:2]
    if padding_mask.shape[1] < seqlen_q:  # no cache explains it: the mask is shorter than the input
        raise ValueError(f"the padding mask covers {padding_mask.shape[1]} positions but the input has {seqlen_q} "
                         "query tokens; give attention_mask one entry per token (batch, seqlen)")
    if padding_mask.shape[0] != batch:
        raise ValueError(f"the padding mask has batch {padding_mask.shape[0]}, the input {batch}")
    if k.shape[1] > padding_mask.shape[1]:  # a static cache holds more slots than tokens seen: drop the empty ones
        k, v = k[:, : padding_mask.shape[1]], v[:, : padding_mask.shape[1]]
    if k.shape[1] != padding_mask.shape[1]:
        raise ValueError(
            f"the padding mask covers {padding_mask.shape[1]} key positions but the keys have {k.shape[1]}"
        )
    slots = RIGHT_PADDING_AS_SLOTS
    bounds = _boundaries.get(padding_mask, ("mask", seqlen_q, q.device, slots),
                             lambda: _mask_boundaries(padding_mask, seqlen_q, q.device, slots))
    return _unpad(q, k, v, bounds)


HOLES_MESSAGE = (
    "padding inside a sequence (attention_mask zeros between ones, or between tokens of one packed sequence) in a "
    "layer with a sliding window or chunks: fa3nn counts the window over the real tokens, transformers over positions, "
    "so the two would differ; pad at the ends, or use attn_implementation='sdpa' or 'eager' for such inputs")


def holes(real: torch.Tensor) -> torch.Tensor:
    """(batch, seqlen) bool: padding tokens with real tokens on both sides in their row."""
    before = real.cumsum(-1) > 0
    after = real.flip(-1).cumsum(-1).flip(-1) > 0
    return ~real & before & after


def refuse_holes_under_a_window(padding_mask: torch.Tensor) -> None:
    """A layer with a window or chunks and a padding mask with holes (once per mask tensor: one host read)."""
    if _boundaries.get(padding_mask, ("holes",), lambda: bool(holes(padding_mask.bool()).any())):
        raise NotImplementedError(HOLES_MESSAGE)


def _unpad(q, k, v, bounds: tuple) -> Packed:
    """q/k/v gathered by _mask_boundaries' `bounds` (rows None: every row kept, flattened: slots, or all queries)."""
    batch, seqlen_q = q.shape[:2]
    rows_q, rows_k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k = bounds

    def gather(x, rows):
        return _flatten(x) if rows is None else _flatten(x).index_select(0, rows)

    return Packed(q=gather(q, rows_q), k=gather(k, rows_k), v=gather(v, rows_k), cu_seqlens_q=cu_seqlens_q,
                  cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, query_rows=rows_q,
                  batch=batch, seqlen_q=seqlen_q)


def unpad_keys_by_mask(q, k, v, padding_mask: torch.Tensor) -> Packed:
    """Case 1c. Non-causal attention without a window: every query row is kept and sees its row's real keys. Needed
    where the queries are not positions of the keys (cross-attention: decoder queries, the encoder's padding mask over
    the keys, at any lengths); under a padding mask over queries and keys alike (an encoder), a query's output depends
    on the keys' padding only, so keeping every query changes nothing but what padded query rows hold (eager's hold
    values too) and costs their share of the work."""
    batch, seqlen_q = q.shape[:2]
    if tuple(padding_mask.shape) != (batch, k.shape[1]):
        raise ValueError(f"the padding mask has shape {tuple(padding_mask.shape)}; the keys are (batch, seqlen_k) "
                         f"{tuple(k.shape[:2])}")
    bounds = _boundaries.get(padding_mask, ("keys", seqlen_q, q.device),
                             lambda: _key_mask_boundaries(padding_mask, seqlen_q, q.device))
    return _unpad(q, k, v, bounds)


def _key_mask_boundaries(padding_mask: torch.Tensor, seqlen_q: int, device: torch.device) -> tuple:
    mask_k = padding_mask.bool()
    lengths_k = mask_k.sum(-1, dtype=torch.int32)
    batch = mask_k.shape[0]
    cu_seqlens_q = torch.arange(batch + 1, dtype=torch.int32, device=device) * seqlen_q
    rows_k = mask_k.flatten().nonzero().flatten()
    return (None, rows_k, cu_seqlens_q, _cu_seqlens(lengths_k).to(device), seqlen_q,
            int(lengths_k.max()) if batch else 0)


def _mask_boundaries(padding_mask: torch.Tensor, seqlen_q: int, device: torch.device, slots: bool = True) -> tuple:
    """What unpadding needs from the mask (host syncs: nonzero, max), computed once per mask tensor. A right-padded
    mask with as many queries as keys (training) needs no unpadding: each row is a slot of fa3nn.slots, whose used
    rows come first (rows None, boundaries three per row), which saves gathering q, k, v and scattering the output
    (and the reverse in the backward) in every layer."""
    mask_k = padding_mask.bool()
    lengths_k = mask_k.sum(-1, dtype=torch.int32)
    batch, seqlen = mask_k.shape
    right_padded = torch.equal(mask_k, torch.arange(seqlen, device=mask_k.device) < lengths_k[:, None])
    if slots and seqlen_q == seqlen and right_padded:
        starts = tuple(i * seqlen for i in range(batch + 1))
        used = tuple(lengths_k.tolist())
        cu_q, cu_k = split_boundaries(starts, used, starts, used)
        return None, None, boundary_tensor(cu_q, device), boundary_tensor(cu_k, device), longest(cu_q), longest(cu_k)
    rows_k = mask_k.flatten().nonzero().flatten()
    mask_q = mask_k[:, -seqlen_q:]
    lengths_q = mask_q.sum(-1, dtype=torch.int32)
    rows_q = rows_k if seqlen_q == mask_k.shape[1] else mask_q.flatten().nonzero().flatten()
    return (
        rows_q, rows_k, _cu_seqlens(lengths_q), _cu_seqlens(lengths_k),
        int(lengths_q.max()) if batch else 0, int(lengths_k.max()) if batch else 0,
    )


def pack_by_cu_seqlens(q, k, v, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k) -> Packed:
    """Case 2. Sequences flattened along batch x seqlen, boundaries given explicitly (int32 or int64 tensors)."""
    if q.shape[:2] != k.shape[:2]:
        raise ValueError(
            "cu_seq_lens_q/k describe flattened sequences, which needs as many query as key positions; got "
            f"q {tuple(q.shape[:2])}, k {tuple(k.shape[:2])} (batch, seqlen)"
        )
    return Packed(
        q=_flatten(q), k=_flatten(k), v=_flatten(v),
        cu_seqlens_q=cu_seq_lens_q.to(device=q.device, dtype=torch.int32),
        cu_seqlens_k=cu_seq_lens_k.to(device=q.device, dtype=torch.int32),
        max_seqlen_q=int(max_length_q), max_seqlen_k=int(max_length_k),
        query_rows=None, batch=q.shape[0], seqlen_q=q.shape[1],
    )


def sequence_starts(position_ids: torch.Tensor) -> torch.Tensor:
    """Bool (batch, seqlen): True where a sequence starts (a row's first token, or a position not above its left
    neighbour's: a restart; a skip ahead continues the sequence, module docstring case 3)."""
    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] <= position_ids[:, :-1]
    return starts


def pack_by_position_ids(q, k, v, position_ids: torch.Tensor) -> Packed | None:
    """Case 3. Returns None when every row holds one sequence (a plain dense call does then)."""
    batch, seqlen = q.shape[:2]
    if position_ids.dim() != 2 or k.shape[1] != seqlen or seqlen <= 1:
        return None  # decoding with a cache, or an unusual layout: position ids say nothing about packing
    bounds = _boundaries.get(
        position_ids, ("positions", batch, seqlen, q.device),
        lambda: _position_boundaries(position_ids.to(q.device).expand(batch, -1)),
    )
    if bounds is None:
        return None
    cu_seqlens, max_seqlen = bounds
    return Packed(
        q=_flatten(q), k=_flatten(k), v=_flatten(v),
        cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens, max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen,
        query_rows=None, batch=batch, seqlen_q=seqlen,
    )


def _position_boundaries(position_ids: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """cu_seqlens and the longest sequence of restarting position ids, or None when each row is one sequence (a
    host sync, as in transformers' own check; once per position_ids tensor)."""
    batch, seqlen = position_ids.shape
    starts = sequence_starts(position_ids)
    if int(starts.sum()) == batch:
        return None
    return cu_from_starts(starts.flatten(), position_ids.device)


def cu_from_starts(flat_starts: torch.Tensor, device: torch.device, longest: int | None = None
                   ) -> tuple[torch.Tensor, int]:
    """cu_seqlens (int32, on `device`) and the longest sequence from flags of sequence starts over flattened tokens
    (host reads; one fewer where the caller knows `longest`)."""
    starts = flat_starts.nonzero().flatten().to(torch.int32)  # (the end appended in place: no blocking copy)
    cu_seqlens = torch.nn.functional.pad(starts, (0, 1), value=flat_starts.numel()).to(device)
    return cu_seqlens, int(cu_seqlens.diff().max()) if longest is None else longest
