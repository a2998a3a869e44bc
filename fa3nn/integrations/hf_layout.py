"""From the layout fa3nn's mask function reads out of a transformers mask (hf_mask_probe.mask_layout) to attention
calls: the segments as packed sequences (one varlen call, causal or not as the mask is), and bidirectional blocks
(Gemma 3's image tokens, PaliGemma's prefix) as a second, non-causal call whose rows replace the first's. Before
either, the layout's recorded pairs are checked against what the calls would attend for this layer.

A block's tokens see the whole block and, causally, their segment before it, so its queries form one packed
sequence with the keys from the segment's first token to the block's last, non-causal, the layer's left window kept
(Gemma 3's sliding layers AND the window with OR(causal, block); an OR of the window with the blocks, as PaliGemma 2's
sliding mask is built, lets a long block past the window and is refused by the check). The first call computes those
rows too (as causal ones) and they are overwritten: blocks are a small share of a row, and the first call stays the
plain one. The second call's keys are gathered per block, so the keys before a block are held once more per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.integrations.hf_mask_probe import (
    BIDIRECTIONAL,
    CUSTOM,
    NO_BLOCK,
    PADDING,
    latest_real,
    previous_real,
    witness_distances,
    witness_offsets,
)
from fa3nn.integrations.hf_padding import (
    HOLES_MESSAGE,
    RIGHT_PADDING_AS_SLOTS,
    Packed,
    _boundaries,
    _flatten,
    _key_mask_boundaries,
    _mask_boundaries,
    _unpad,
    cu_from_starts,
    hf_window,
    holes,
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


def pack_by_layout(q, k, v, layout: torch.Tensor, is_causal: bool, sliding_window: int | None, chunk: int
                   ) -> tuple[Packed | None, Blocks | None, bool]:
    """(the segments' Packed, or None for a dense call; the blocks' second call, or None; whether the call is causal:
    a mask bidirectional within segments makes it non-causal whatever the layer's flag, as eager / SDPA follow the
    mask). Refuses a layout whose recorded pairs differ from what these calls would attend (_witness_mismatch)."""
    batch, seqlen = q.shape[:2]
    if layout.dim() != 3 or tuple(layout.shape[1:]) != (batch, seqlen) or k.shape[1] != seqlen:
        raise ValueError(f"a mask layout of shape {tuple(layout.shape)} for q {tuple(q.shape[:2])} and k "
                         f"{tuple(k.shape[:2])} (batch, seqlen): it describes queries and keys at the same positions")
    slots = RIGHT_PADDING_AS_SLOTS
    bounds, blocks, causal = _boundaries.get(
        layout, ("layout", q.device, slots, is_causal, sliding_window, chunk),
        lambda: _layout_calls(layout, q.device, slots, is_causal, sliding_window, chunk))
    return (None if bounds is None else _unpad(q, k, v, bounds)), blocks, causal


def blocks_agree(layout: torch.Tensor, cu_seqlens: torch.Tensor) -> bool:
    """With the caller's cu_seq_lens: whether the layout holds bidirectional blocks, which only it can run (False:
    the caller's boundaries serve alone). Its sequences must then be the caller's (transformers saw the packing in
    restarting position_ids); blocks beside boundaries it did not see are refused. Once per layout tensor."""
    def compute():
        segments, blocks = layout[0], layout[1]
        if not bool((blocks >= 0).any()):
            return False
        real = segments >= 0
        starts = _Neighbours(real).segment_starts(segments).flatten().nonzero().flatten()
        bounds = cu_seqlens.to(starts.device).long()
        if not (bool(real.all()) and starts.numel() == bounds.numel() - 1 and torch.equal(starts, bounds[:-1])):
            raise NotImplementedError(
                "cu_seq_lens together with bidirectional blocks (images) that transformers' mask places without "
                "them: pass position_ids that restart at each sequence as well (DataCollatorWithFlattening's "
                "default), so that the mask holds both")
        return True

    return _boundaries.get(layout, ("blocks beside cu_seq_lens",), compute)


class _Neighbours:
    """Each token's previous and next real token in a layout's rows: shifts where the layout has no padding, gathers
    at positions computed once (previous_real) where it has."""

    def __init__(self, real: torch.Tensor | None):
        self.real = real
        self.previous = None if real is None else previous_real(real)
        self.next_flipped = None  # read on the first `after`

    def before(self, values: torch.Tensor, missing) -> torch.Tensor:
        """values at each token's previous real token (missing for a row's first)."""
        if self.real is None:
            return torch.nn.functional.pad(values[:, :-1], (1, 0), value=missing)
        return _at(values, self.previous, missing)

    def segment_starts(self, segments: torch.Tensor) -> torch.Tensor:
        """Real tokens whose previous real token is in another segment (or that have none)."""
        starts = segments != self.before(segments, PADDING)
        return starts if self.real is None else starts & self.real

    def after(self, values: torch.Tensor, missing) -> torch.Tensor:
        """values at each token's next real token (missing for a row's last)."""
        if self.real is None:
            return torch.nn.functional.pad(values[:, 1:], (0, 1), value=missing)
        if self.next_flipped is None:
            self.next_flipped = previous_real(self.real.flip(-1))
        return _at(values.flip(-1), self.next_flipped, missing).flip(-1)


def _layout_calls(layout: torch.Tensor, device: torch.device, slots: bool, is_causal: bool, sliding_window, chunk
                  ) -> tuple:
    """pack_by_layout's (boundaries or None, Blocks or None, causal), once per layout tensor and layer kind. Two host
    reads: the answers that pick the path (custom tokens, padding, blocks, causal), then the recorded pairs' check
    with the packing's answers; the boundaries read the segment starts besides. Every op is a kernel launch and host
    time while the GPU waits (s37a): a layout without padding takes shifts for its neighbours."""
    segments, blocks = layout[0], layout[1]
    seqlen = segments.shape[1]
    bidirectional = (blocks == BIDIRECTIONAL).any()  # (no torch.tensor(is_causal, device=...): a blocking copy)
    causal_if_so = ~bidirectional if is_causal else torch.zeros_like(bidirectional)
    custom, padded, any_block, causal = torch.stack([
        (segments == CUSTOM).any(), (segments == PADDING).any(), (blocks >= 0).any(), causal_if_so]).tolist()
    if custom:
        raise NotImplementedError(CUSTOM_MESSAGE)
    if any_block and chunk:
        raise NotImplementedError("bidirectional blocks in the mask of a chunked layer; use attn_implementation="
                                  "'eager'")
    window = hf_window(causal, sliding_window, seqlen)
    real = segments >= 0 if padded else None
    neighbours = _Neighbours(real)
    starts = neighbours.segment_starts(segments)
    if padded:
        # a hole: padding inside one sequence (its next real token continues the sequence before it)
        inside = holes(real) & (neighbours.after(segments, PADDING) == _at(segments, latest_real(real), PADDING))
    # positions in the packed layout (real tokens only) and of each segment's first token
    rank = real.cumsum(-1) - 1 if padded else torch.arange(seqlen, device=segments.device).expand_as(segments)
    first_rank = torch.where(starts, rank, 0).cummax(-1).values
    mismatch = _witness_mismatch(layout, real, neighbours, rank, first_rank, causal, window, chunk, any_block)
    longest = rank - first_rank + 1
    any_mismatch, one_per_row, any_hole, longest = torch.stack([
        mismatch.any(), (starts.sum(-1) <= 1).all(), inside.any() if padded else mismatch.new_zeros(()),
        (longest if real is None else torch.where(real, longest, 0)).max() if segments.numel() else
        rank.new_zeros(())]).tolist()
    if any_hole and (chunk or window != (-1, -1)):
        raise NotImplementedError(HOLES_MESSAGE)
    if any_mismatch:
        row, query = (int(x) for x in mismatch.nonzero()[0])
        raise NotImplementedError(WITNESS_MESSAGE.format(causal=causal, window=window, chunk=chunk, query=query,
                                                         row=row))
    real = segments >= 0 if real is None else real
    if one_per_row:  # at most one sequence per row: padding alone, or nothing
        if not padded:
            bounds = None
        elif not causal and window == (-1, -1):  # every query sees all its row's real keys: keep every query row
            bounds = _key_mask_boundaries(real, segments.shape[1], device)  # (cross-attention: they are not keys)
        else:
            bounds = _mask_boundaries(real, segments.shape[1], device, slots)
    else:
        bounds = _segment_boundaries(real, starts, not padded, device, int(longest))
    return bounds, (_block_sequences(layout, real, starts, device) if any_block else None), causal


def _at(values: torch.Tensor, index: torch.Tensor, missing) -> torch.Tensor:
    """values at each row's positions `index` (missing where -1)."""
    return torch.where(index >= 0, values.gather(1, index.clamp(min=0)), missing)


def _witness_mismatch(layout, real, neighbours: _Neighbours, rank, first_rank, causal: bool, window: tuple[int, int],
                      chunk: int, any_block: bool) -> torch.Tensor:
    """(batch, seqlen) bool: queries where a pair mask_layout recorded (each query with the tokens 1, 2, 4, ... back
    and ahead) differs from what the calls attend: each segment alone under (causal, window, chunk) counted over its
    real tokens (rank: the packed layout; real None: no padding), block queries non-causal up to their block's last
    key with the left window. A difference is a mask fa3nn would run differently (another window than the layer's,
    keys dropped or added at a distance, a block longer than a window that does not apply inside it). Tensor ops
    only, every distance at once."""
    segments, blocks, witnesses = layout[0], layout[1], layout[2:]
    seqlen = segments.shape[1]
    distances = witness_distances(seqlen)
    if witnesses.shape[0] != 2 * len(distances):
        raise ValueError(f"a mask layout with {witnesses.shape[0]} witness rows for seqlen {seqlen}")
    device = segments.device
    positions = torch.arange(seqlen, device=device)
    offsets = witness_offsets(seqlen, device).view(-1, 1, 1)
    kv = (positions + offsets).clamp(0, seqlen - 1)  # (2 n, 1, seqlen); out of range: recorded as -1

    def at_key(x):
        return x.expand(kv.shape[0], *x.shape).gather(2, kv.expand(-1, x.shape[0], -1))

    valid = witnesses >= 0
    if real is None:
        back = -offsets  # > 0: the key is before the query
    else:
        valid = valid & real & at_key(real)
        back = rank - at_key(rank)
    left, right = window
    sees = at_key(segments) == segments
    if left >= 0:
        sees &= back <= left
    if chunk:
        sees &= (rank - first_rank) // chunk == (at_key(rank) - at_key(first_rank)) // chunk
    if causal and any_block:
        in_block = blocks >= 0
        block_end = in_block & (blocks != neighbours.after(blocks, NO_BLOCK - 1))
        block_last = torch.where(block_end, positions, seqlen).flip(-1).cummin(-1).values.flip(-1)
        sees &= torch.where(in_block, kv <= block_last, back >= 0)
    elif causal:
        sees &= back >= 0
    elif right >= 0:
        sees &= -back <= right
    return (valid & (sees != (witnesses == 1))).any(0)


WITNESS_MESSAGE = (
    "the model's attention mask differs from what fa3nn would run for this layer (causal={causal}, window={window}, "
    "attention_chunk={chunk}, sequences and bidirectional blocks read from the mask) at query {query} of row {row}, "
    "among others: keys dropped or added at a distance, or a window other than the layer's; use "
    "attn_implementation='sdpa' or 'eager' for such inputs")


def _segment_boundaries(real: torch.Tensor, starts: torch.Tensor, all_real: bool, device: torch.device,
                        longest: int) -> tuple:
    """hf_padding._mask_boundaries' tuple for several sequences in a row: the real tokens, gathered unless all are;
    `longest` the longest sequence (read with the check)."""
    rows = None if all_real else real.flatten().nonzero().flatten()
    kept_starts = starts.flatten() if rows is None else starts.flatten().index_select(0, rows)
    cu_seqlens = cu_from_starts(kept_starts, device, longest)[0]
    return rows, rows, cu_seqlens, cu_seqlens, longest, longest


def _block_sequences(layout: torch.Tensor, real: torch.Tensor, starts: torch.Tensor, device: torch.device) -> Blocks:
    """One packed sequence per block: its real tokens as queries, the real tokens from its segment's first to its
    last as keys (flat rows; padding holes skipped). Three host reads whatever the number of blocks: the real tokens'
    rows and the block tokens' (nonzero), then each block's span in the real rows; the rows are slices of the first."""
    blocks = layout[1]
    seqlen = blocks.shape[1]
    positions = torch.arange(seqlen, device=blocks.device).expand_as(blocks)
    segment_first = torch.where(starts, positions, 0).cummax(-1).values.flatten()
    flat_real = real.flatten()
    real_rows = flat_real.nonzero().flatten()
    block_tokens = (blocks.flatten() >= 0).nonzero().flatten()
    ids = blocks.flatten()[block_tokens]
    # per block: its first and last flat row (block ids are unique over the batch and increase along it)
    first_of_block = torch.ones_like(ids, dtype=torch.bool)
    first_of_block[1:] = ids[1:] != ids[:-1]
    firsts = block_tokens[first_of_block]
    lasts = block_tokens[torch.cat([first_of_block[1:], first_of_block.new_ones(1)])]
    segment_starts = firsts - firsts % seqlen + segment_first[firsts]
    # a flat range [a, b] holds the real rows real_rows[exclusive[a]:inclusive[b]]
    inclusive = flat_real.cumsum(0)
    exclusive = inclusive - flat_real.long()
    q_lo, hi, k_lo = exclusive[firsts], inclusive[lasts], exclusive[segment_starts]
    spans = torch.stack([q_lo, hi, k_lo]).tolist()
    q_rows = torch.cat([real_rows[a:b] for a, b in zip(spans[0], spans[1])])
    k_rows = torch.cat([real_rows[a:b] for a, b in zip(spans[2], spans[1])])

    def cumulative(lengths):  # on the device: no copy of host values in
        return torch.nn.functional.pad(lengths.cumsum(0).to(torch.int32), (1, 0)).to(device)

    return Blocks(q_rows=q_rows.to(device), k_rows=k_rows.to(device), cu_seqlens_q=cumulative(hi - q_lo),
                  cu_seqlens_k=cumulative(hi - k_lo), max_seqlen_q=max(b - a for a, b in zip(spans[0], spans[1])),
                  max_seqlen_k=max(b - a for a, b in zip(spans[2], spans[1])))
