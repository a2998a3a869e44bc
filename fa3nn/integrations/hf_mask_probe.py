"""What a transformers mask function says about sequence boundaries, read without building the mask.

transformers (>= 4.53, `masking_utils`) hands the registered mask function a `mask_function(batch, head, q, kv)` and
`allow_is_causal_skip`; the latter is False whenever the pattern is more than causal / sliding over each row: packed
sequences found in position_ids, chunked layers, custom `or_mask_function` / `and_mask_function` / block overlays
(Gemma 3's and PaliGemma's bidirectional image / prefix tokens), and in 5.x every bidirectional mask. fa3nn's
attention takes sequence boundaries, not masks, so the mask function is asked about O(seqlen log seqlen) pairs
instead of seqlen^2, in one vmapped evaluation (as transformers vmaps custom masks; tensor ops only, no host read, so
it traces under torch.compile as transformers' own mask building does):

* each real token and the previous real one (padding holes skipped), both ways. "Query i sees its previous key":
  False exactly where a new segment starts (a packed sequence, a chunk). "The previous query sees key i": never in a
  causal row, wherever the former holds in a bidirectional mask (then bidirectional within segments). A causal row
  where it holds has bidirectional blocks: runs of tokens that see each other both ways (blockwise_overlay). A token
  seen by its previous one but not seeing it is CUSTOM: refused by the attention.
* each token with the tokens 1, 2, 4, ... positions back and ahead (the witnesses). The attention checks them against
  what it would run for the layer (segments alone, causal or not, the layer's window and chunk, block queries up to
  their block's end) and refuses any difference: keys dropped or added at a distance (sink tokens, strides), a window
  other than the layer's, a block that a window does not bound.

The answer is a (2 + 2 n, batch, seqlen) int32 layout, n = len(witness_distances(seqlen)): [0] segment ids
(increasing along a row, PADDING on padding tokens, CUSTOM), [1] block ids (NO_BLOCK outside blocks, unique over the
batch; BIDIRECTIONAL on every real token of a bidirectional mask, whose call is then non-causal whatever the layer's
flag, as in eager / SDPA), [2, 2 + n) what each query sees d back, [2 + n, 2 + 2 n) d ahead (1 / 0, -1 out of range).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PADDING = -1  # a padding token (the 2D attention mask's False)
CUSTOM = -2  # a token whose pattern is neither causal (with blocks) nor bidirectional within segments
NO_BLOCK = -1  # a token outside bidirectional blocks
BIDIRECTIONAL = -3  # every real token's block id when the whole mask is bidirectional within segments


def pairs(mask_function: Callable, q_idx: torch.Tensor, kv_idx: torch.Tensor, index_based: bool = False,
          batch_size: int | None = None) -> torch.Tensor:
    """(batch, ...) bool: mask_function(b, 0, q_idx[b, ...], kv_idx[b, ...]); q_idx and kv_idx broadcast to
    (batch_size, ...) (batch_size: their first dimension by default). `index_based`: the function is built of
    elementwise ops on its index tensors, which transformers >= 5 says with use_vmap=False (then it broadcasts them
    itself) and its own mask functions are; one call on the broadcast indices then. Otherwise vmapped as transformers
    vmaps custom mask functions (indexing a tensor with a 0-d index tensor needs TransformGetItemToIndex under vmap),
    which costs host time per op: 1.2 ms against 0.02 for transformers' packed mask on the CPU."""
    batch_size = q_idx.shape[0] if batch_size is None else batch_size
    shape = torch.broadcast_shapes(q_idx.shape, kv_idx.shape)
    shape = (batch_size, *shape[1:])
    head = torch.zeros((), dtype=q_idx.dtype, device=q_idx.device)
    if index_based:
        batch = torch.arange(batch_size, device=q_idx.device).view(-1, *(1,) * (len(shape) - 1))
        seen = torch.as_tensor(mask_function(batch, head, q_idx, kv_idx), dtype=torch.bool, device=q_idx.device)
        return seen.expand(shape)  # (a function of the batch alone gives (batch, 1, ...); a constant, 0-d)
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    def one(b, q, kv):
        return torch.as_tensor(mask_function(b, head, q, kv), dtype=torch.bool, device=q_idx.device)

    over_pairs = torch.vmap(one, in_dims=(None, 0, 0))
    over_batch = torch.vmap(over_pairs, in_dims=(0, 0, 0))
    q_flat, kv_flat = (x.expand(shape).flatten(1) for x in (q_idx, kv_idx))  # (an empty batch too)
    with TransformGetItemToIndex():
        seen = over_batch(torch.arange(batch_size, device=q_idx.device), q_flat, kv_flat)
    return seen.view(shape)


def _both_sides(pair_flags: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """Flags of pairs (previous[b, i], i) -> flags of the tokens in one (both ends)."""
    return pair_flags | _scatter_to_previous(pair_flags, previous)


def _scatter_to_previous(flags: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """out[b, previous[b, i]] |= flags[b, i] (previous -1: nothing)."""
    out = torch.zeros(flags.shape[0], flags.shape[1] + 1, dtype=torch.int32, device=flags.device)
    index = torch.where(previous >= 0, previous, flags.shape[1])  # -1 -> a spare column
    out.scatter_add_(1, index, (flags & (previous >= 0)).to(torch.int32))
    return out[:, :-1] > 0


def latest_real(real: torch.Tensor) -> torch.Tensor:
    """(batch, seqlen) long: the position of each token's latest real token at or before it (-1 before the first)."""
    positions = torch.arange(real.shape[1], device=real.device).expand_as(real)
    return torch.where(real, positions, -1).cummax(-1).values


def previous_real(real: torch.Tensor) -> torch.Tensor:
    """(batch, seqlen) long: the position of each token's previous real token (-1 for none)."""
    latest = latest_real(real)
    return torch.cat([torch.full_like(latest[:, :1], -1), latest[:, :-1]], dim=1)


def witness_distances(seqlen: int) -> list[int]:
    """The distances 1, 2, 4, ... below seqlen at which mask_layout records what each query sees, back and ahead."""
    return [1 << j for j in range(max(seqlen - 1, 1).bit_length())]


def witness_offsets(seqlen: int, device: torch.device) -> torch.Tensor:
    """(2 n,) long on `device`: -1, -2, -4, ..., then 1, 2, 4, ... (witness_distances), made there: a list copied in
    (torch.tensor(..., device=...)) is a blocking copy, which synchronizes with the GPU."""
    distances = torch.pow(2, torch.arange(len(witness_distances(seqlen)), device=device))
    return torch.cat([-distances, distances])


def mask_layout(mask_function: Callable, batch_size: int, seqlen: int, padding: torch.Tensor | None,
                device: torch.device, index_based: bool = False) -> torch.Tensor:
    """The layout (module docstring) of `mask_function` over `seqlen` queries and as many keys at the same positions
    (no cache); `padding` (batch, seqlen) bool is True on real tokens, or None; `index_based` as in `pairs`. Each op
    here is a kernel launch and ~15-30 us of host time on the GPU machine while the GPU waits (s37b): without
    padding a token's neighbour is the one before it, and the pairs with it are the witnesses at distance 1."""
    positions = torch.arange(seqlen, device=device)
    distances = witness_distances(seqlen)
    offsets = witness_offsets(seqlen, device)
    targets = positions + offsets[:, None]  # (2 n, seqlen): what each query is recorded with
    in_range = (targets >= 0) & (targets < seqlen)
    if padding is None:
        # One evaluation of every recorded pair: (batch, 2 n, seqlen). offsets[0] = -1: each token with the one before
        # it; offsets[n] = +1: each token with the one after it, i.e. the previous token with this one once shifted.
        seen = pairs(mask_function, positions[None, None], targets.clamp(0, seqlen - 1)[None], index_based,
                     batch_size)
        sees_prev = seen[:, 0]
        sees_next = torch.nn.functional.pad(seen[:, len(distances), :-1], (1, 0))
        has_previous = positions > 0
        real, witnesses = None, seen.transpose(0, 1)
    else:
        real = padding.bool()
        previous = previous_real(real)  # each token's neighbour (padding holes skipped)
        has_previous = real & (previous >= 0)
        prev = previous.clamp(min=0)
        expanded = positions.expand(batch_size, seqlen)
        q_idx = torch.cat([expanded, prev, expanded.repeat(1, len(offsets))], dim=1)
        kv_idx = torch.cat([prev, expanded, targets.clamp(0, seqlen - 1).flatten().expand(batch_size, -1)], dim=1)
        seen = pairs(mask_function, q_idx, kv_idx, index_based).view(batch_size, 2 + len(offsets), seqlen)
        sees_prev, sees_next, witnesses = seen[:, 0], seen[:, 1], seen[:, 2:].transpose(0, 1)
    # A segment starts at a row's first real token and where the previous real key is not visible.
    starts = ~has_previous | ~sees_prev
    if real is not None:
        starts = starts & real
    ids = starts.cumsum(-1, dtype=torch.int32) - 1
    # Bidirectional within segments: next visible exactly where previous is. Otherwise causal rows, whose neighbours
    # that see each other both ways are blocks.
    bidirectional = ~(has_previous & (sees_next != sees_prev)).any()
    linked = has_previous & sees_next & ~bidirectional  # token i and its previous real one in one block
    custom = linked & ~sees_prev  # seen by its previous token but not seeing it: both ends
    in_block = linked
    if real is None:
        custom = custom | torch.nn.functional.pad(custom[:, 1:], (0, 1))
        in_block = in_block | torch.nn.functional.pad(in_block[:, 1:], (0, 1))
    else:
        custom, in_block = _both_sides(custom, previous), _both_sides(in_block, previous)
    block_start = in_block & ~linked
    blocks = torch.where(in_block, block_start.flatten().cumsum(0).view_as(block_start) - 1, NO_BLOCK)
    blocks = torch.where(bidirectional, BIDIRECTIONAL, blocks)
    ids = torch.where(custom, CUSTOM, ids)
    if real is not None:
        ids, blocks = torch.where(real, ids, PADDING), torch.where(real, blocks, NO_BLOCK)
    witnesses = torch.where(in_range[:, None], witnesses.to(torch.int32), -1)
    return torch.cat([ids.to(torch.int32)[None], blocks.to(torch.int32)[None], witnesses])
