"""What a transformers mask function says about sequence boundaries, read without building the mask.

transformers (>= 4.53, `masking_utils`) hands the registered mask function a `mask_function(batch, head, q, kv)` and
`allow_is_causal_skip`; the latter is False whenever the pattern is more than causal / sliding over each row: packed
sequences found in position_ids, chunked layers, and custom `or_mask_function` / `and_mask_function` / block
overlays (Gemma 3's and PaliGemma's bidirectional image / prefix tokens). fa3nn's attention takes sequence
boundaries, not masks, so the mask function is asked only about neighbours (and each block's ends), which is linear
in seqlen instead of quadratic:

* "query i sees key i - 1": False exactly where a new segment starts (a packed sequence, a chunk); inside a segment
  causal, sliding windows (>= 2) and bidirectional patterns all allow it;
* "query i - 1 sees key i": never in a causal row, wherever the former holds in a bidirectional one (the whole mask
  then is bidirectional within segments). A causal row where it holds has bidirectional blocks: runs of tokens that
  see each other both ways (blockwise_overlay: each sees the whole run, and causally what precedes it). Each block
  token is checked to see its block's last key and to be seen by its block's first query; a token that fails, or any
  other shape, is CUSTOM: a pattern fa3nn cannot run, refused by the attention.

A bidirectional mask's segments are checked for symmetry with their ends (a look-ahead of one key also links every
neighbour; a window, as ModernBERT's local layers have, keeps the symmetry). The answer is a (2, batch, seqlen) int32
layout: [0] segment ids (increasing along a row, PADDING on padding tokens, CUSTOM where the pattern cannot be
expressed), [1] block ids (NO_BLOCK outside blocks, unique over the batch; BIDIRECTIONAL on every real token of a
bidirectional mask, which then holds whatever the layer says), made with tensor ops only: no host read here (the
attention reads it once per tensor, fa3nn.memo), so it traces under torch.compile as transformers' own mask building
does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PADDING = -1  # a padding token (the 2D attention mask's False)
CUSTOM = -2  # a token whose pattern is neither causal (with blocks) nor bidirectional within segments
NO_BLOCK = -1  # a token outside bidirectional blocks
BIDIRECTIONAL = -3  # every real token's block id when the whole mask is bidirectional within segments


def _pairs(mask_function: Callable, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """(batch, n) bool: mask_function(b, 0, q_idx[b, j], kv_idx[b, j]), vmapped as transformers vmaps custom mask
    functions (indexing a tensor with a 0-d index tensor needs TransformGetItemToIndex under vmap)."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    head = torch.zeros((), dtype=q_idx.dtype, device=q_idx.device)

    def one(b, q, kv):
        return torch.as_tensor(mask_function(b, head, q, kv), dtype=torch.bool, device=q_idx.device)

    over_pairs = torch.vmap(one, in_dims=(None, 0, 0))
    over_batch = torch.vmap(over_pairs, in_dims=(0, 0, 0))
    with TransformGetItemToIndex():
        return over_batch(torch.arange(q_idx.shape[0], device=q_idx.device), q_idx, kv_idx)


def _both_sides(pair_flags: torch.Tensor) -> torch.Tensor:
    """(batch, seqlen - 1) flags of neighbour pairs (i - 1, i) -> (batch, seqlen) flags of the tokens in one."""
    tokens = torch.zeros(pair_flags.shape[0], pair_flags.shape[1] + 1, dtype=torch.bool, device=pair_flags.device)
    tokens[:, 1:] |= pair_flags
    tokens[:, :-1] |= pair_flags
    return tokens


def mask_layout(mask_function: Callable, batch_size: int, seqlen: int, padding: torch.Tensor | None,
                device: torch.device) -> torch.Tensor:
    """The layout (module docstring) of `mask_function` over `seqlen` queries and as many keys at the same positions
    (no cache); `padding` (batch, seqlen) bool is True on real tokens, or None."""
    real = torch.ones(batch_size, seqlen, dtype=torch.bool, device=device) if padding is None else padding.bool()
    no_blocks = torch.full((batch_size, seqlen), NO_BLOCK, dtype=torch.int32, device=device)
    if seqlen <= 1:
        return torch.stack([torch.where(real, 0, PADDING).to(torch.int32), no_blocks])
    positions = torch.arange(seqlen, device=device).expand(batch_size, seqlen)
    later, earlier = positions[:, 1:], positions[:, :-1]
    sees_prev = _pairs(mask_function, later, earlier)  # (batch, seqlen - 1): query i sees key i - 1
    sees_next = _pairs(mask_function, earlier, later)  # query i - 1 sees key i
    both_real = real[:, 1:] & real[:, :-1]
    # A segment starts at a row's first token, after a padding token, and where the previous key is not visible.
    starts = torch.ones_like(real)
    starts[:, 1:] = ~sees_prev | ~real[:, :-1]
    ids = torch.where(real, starts.cumsum(-1, dtype=torch.int32) - 1, PADDING)
    # Bidirectional within segments: next visible exactly where previous is. Otherwise causal rows, whose neighbours
    # that see each other both ways are blocks.
    bidirectional = ~(both_real & (sees_next != sees_prev)).any()
    linked = both_real & sees_next & ~bidirectional  # i - 1 and i in one block
    custom = _both_sides(linked & ~sees_prev)  # a token seen by its previous one but not seeing it
    in_block = _both_sides(linked)
    block_start = in_block.clone()
    block_start[:, 1:] &= ~linked
    block_end = in_block.clone()
    block_end[:, :-1] &= ~linked
    # A bidirectional mask's runs are its segments.
    segment_start, segment_end = starts.clone(), torch.ones_like(real)
    segment_end[:, :-1] = starts[:, 1:]
    first = torch.where(bidirectional, _run_first(segment_start, positions), _run_first(block_start, positions))
    last = torch.where(bidirectional, _run_last(segment_end, positions), _run_last(block_end, positions))
    last = last.clamp(max=seqlen - 1)  # clamped indices outside runs: those answers are not used
    sees_last = _pairs(mask_function, positions, last)
    first_sees = _pairs(mask_function, first, positions)
    # A block token sees its block's last key and is seen by its block's first query. A bidirectional segment may
    # hold a window (ModernBERT's local layers), so there the pairs with the run's ends must only be symmetric: a
    # look-ahead of k keys is not (its last query sees the first key, not the other way round).
    last_sees = _pairs(mask_function, last, positions)
    sees_first = _pairs(mask_function, positions, first)
    block_ok = sees_last & first_sees
    symmetric = (sees_last == last_sees) & (first_sees == sees_first)
    custom |= real & torch.where(bidirectional, ~symmetric, in_block & ~block_ok)
    blocks = torch.where(in_block, block_start.flatten().cumsum(0).view_as(block_start) - 1, NO_BLOCK)
    blocks = torch.where(real & bidirectional, BIDIRECTIONAL, blocks)
    return torch.stack([torch.where(custom, CUSTOM, ids).to(torch.int32), blocks.to(torch.int32)])


def _run_first(run_start: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Each token's position of the latest run start at or before it."""
    return torch.where(run_start, positions, 0).cummax(-1).values


def _run_last(run_end: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Each token's position of the earliest run end at or after it (seqlen where none)."""
    return torch.where(run_end, positions, positions.shape[-1]).flip(-1).cummin(-1).values.flip(-1)
