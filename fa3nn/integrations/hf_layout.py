"""From the layout fa3nn's mask function reads out of a transformers mask (hf_mask_probe.mask_layout) to attention
calls: the segments as packed sequences (one varlen call, causal or not as the layer is), and bidirectional blocks
(Gemma 3's image tokens, PaliGemma's prefix) as a second, non-causal call whose rows replace the first's.

A block's tokens see the whole block and, causally, their segment before it, so its queries form one packed
sequence with the keys from the segment's first token to the block's last, non-causal, the layer's left window kept
(transformers' sliding layers AND the window with OR(causal, block)). The first call computes those rows too (as
causal ones) and they are overwritten: blocks are a small share of a row, and the first call stays the plain one.
The second call's keys are gathered per block, so the keys before a block are held once more per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.integrations.hf_mask_probe import BIDIRECTIONAL, CUSTOM
from fa3nn.integrations.hf_padding import (
    RIGHT_PADDING_AS_SLOTS,
    Packed,
    _boundaries,
    _flatten,
    _mask_boundaries,
    _unpad,
)

CUSTOM_MESSAGE = (
    "the model's attention mask lets some queries see keys after them in a shape fa3nn cannot run (neither packed "
    "sequences nor bidirectional blocks of consecutive tokens); use attn_implementation='sdpa' or 'eager' for such "
    "inputs")


@dataclass(frozen=True)
class Blocks:
    """The second call's packed sequences: flat (batch * seqlen) rows of its queries and keys, one sequence per
    block."""

    q_rows: torch.Tensor
    k_rows: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int

    def attend(self, attend, q, k, v, left_window: int) -> torch.Tensor:
        """(total block rows, nheads, headdim_v): `attend` (the layer's call, options bound) non-causal over each
        block's keys, with the layer's left window."""
        gather = lambda x, rows: _flatten(x).index_select(0, rows)  # noqa: E731
        out, _ = attend(gather(q, self.q_rows), gather(k, self.k_rows), gather(v, self.k_rows), self.cu_seqlens_q,
                        self.cu_seqlens_k, self.max_seqlen_q, self.max_seqlen_k, causal=False,
                        window_size=(left_window, -1))
        return out

    def replace(self, full: torch.Tensor, rows_out: torch.Tensor) -> torch.Tensor:
        """`full` (batch, seqlen, ...) with the block rows from `rows_out` (differentiable in both)."""
        flat = _flatten(full).index_copy(0, self.q_rows, rows_out)
        return flat.view(full.shape)


def pack_by_layout(q, k, v, layout: torch.Tensor) -> tuple[Packed | None, Blocks | None, bool]:
    """(the segments' Packed, or None for a dense call; the blocks' second call, or None; whether the mask is
    bidirectional within segments)."""
    batch, seqlen = q.shape[:2]
    if tuple(layout.shape) != (2, batch, seqlen) or k.shape[1] != seqlen:
        raise ValueError(f"a mask layout of shape {tuple(layout.shape)} for q {tuple(q.shape[:2])} and k "
                         f"{tuple(k.shape[:2])} (batch, seqlen): it describes queries and keys at the same positions")
    slots = RIGHT_PADDING_AS_SLOTS
    bounds, blocks, bidirectional = _boundaries.get(layout, ("layout", q.device, slots),
                                                    lambda: _layout_calls(layout, q.device, slots))
    return (None if bounds is None else _unpad(q, k, v, bounds)), blocks, bidirectional


def _layout_calls(layout: torch.Tensor, device: torch.device, slots: bool) -> tuple:
    """pack_by_layout's (boundaries or None, Blocks or None, bidirectional), once per layout tensor. One host read
    for the common answers (a plain batch in transformers 4.5x, which always hands a layout to the mask function
    when position_ids are given: none beyond it); packing and blocks read their positions besides."""
    segments, blocks = layout
    real = segments >= 0
    starts = real.clone()
    starts[:, 1:] &= segments[:, 1:] != segments[:, :-1]
    custom, all_real, one_per_row, any_block, bidirectional = torch.stack([
        (segments == CUSTOM).any(), real.all(), (starts.sum(-1) <= 1).all(), (blocks >= 0).any(),
        (blocks == BIDIRECTIONAL).any(),
    ]).tolist()
    if custom:
        raise NotImplementedError(CUSTOM_MESSAGE)
    if one_per_row:  # at most one sequence per row: padding (hf_padding's own boundaries: right padding as slots)
        bounds = None if all_real else _mask_boundaries(real, segments.shape[1], device, slots)
    else:
        bounds = _segment_boundaries(real, starts, all_real, device)
    return bounds, (_block_sequences(layout, device) if any_block else None), bidirectional


def _segment_boundaries(real: torch.Tensor, starts: torch.Tensor, all_real: bool, device: torch.device) -> tuple:
    """hf_padding._mask_boundaries' tuple for several sequences in a row: the real tokens, gathered unless all are."""
    rows = None if all_real else real.flatten().nonzero().flatten()
    kept_starts = starts.flatten() if rows is None else starts.flatten().index_select(0, rows)
    total = torch.tensor([kept_starts.numel()], dtype=torch.int32, device=starts.device)
    cu_seqlens = torch.cat([kept_starts.nonzero().flatten().to(torch.int32), total]).to(device)
    longest_run = int(cu_seqlens.diff().max())
    return rows, rows, cu_seqlens, cu_seqlens, longest_run, longest_run


def _block_sequences(layout: torch.Tensor, device: torch.device) -> Blocks:
    segments, blocks = layout[0], layout[1]
    seqlen = segments.shape[1]
    q_rows, k_rows, lengths_q, lengths_k = [], [], [], []
    flat_segments = segments.flatten()
    block_tokens = (blocks.flatten() >= 0).nonzero().flatten()
    ids = blocks.flatten()[block_tokens]
    # per block: its first and last flat row (block ids are unique over the batch and increase along it)
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[1:] = ids[1:] != ids[:-1]
    firsts = block_tokens[starts].tolist()
    lasts = block_tokens[torch.cat([starts[1:], starts.new_ones(1)])].tolist()
    for first, last in zip(firsts, lasts):
        row_start = first - first % seqlen
        row = flat_segments[row_start:first + 1]
        elsewhere = (row != row[-1]).nonzero()  # the row's tokens before the block's segment
        segment_start = row_start + (int(elsewhere.max()) + 1 if elsewhere.numel() else 0)
        q_rows.append(torch.arange(first, last + 1))
        k_rows.append(torch.arange(segment_start, last + 1))
        lengths_q.append(last + 1 - first)
        lengths_k.append(last + 1 - segment_start)

    def cumulative(lengths):
        return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)

    return Blocks(q_rows=torch.cat(q_rows).to(device), k_rows=torch.cat(k_rows).to(device),
                  cu_seqlens_q=cumulative(lengths_q), cu_seqlens_k=cumulative(lengths_k), max_seqlen_q=max(lengths_q),
                  max_seqlen_k=max(lengths_k))
