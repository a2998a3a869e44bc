"""What a transformers mask function says about sequence boundaries, read without building the mask.

transformers (>= 4.53, `masking_utils`) hands the registered mask function a `mask_function(batch, head, q, kv)` and
`allow_is_causal_skip`; the latter is False whenever the pattern is more than causal / sliding over each row: packed
sequences found in position_ids, chunked layers, and custom `or_mask_function` / `and_mask_function` / block
overlays (Gemma 3's bidirectional image tokens). fa3nn's attention takes sequence boundaries, not masks, so the
mask function is asked only about neighbours, which is linear in seqlen instead of quadratic:

* "query i sees key i - 1": False exactly where a new segment starts (a packed sequence, a chunk); inside a segment
  causal, sliding windows (>= 2) and bidirectional patterns all allow it;
* "query i - 1 sees key i": never for a causal pattern, wherever the former holds for a bidirectional one; any other
  answer is a custom pattern (some keys in the future visible to some queries) that boundaries cannot express.

The answer is a (batch, seqlen) int32 tensor of segment ids (increasing along a row, PADDING on padding tokens,
CUSTOM where the pattern cannot be expressed), made with tensor ops only: no host read here (the attention reads it
once per tensor, fa3nn.memo), so it traces under torch.compile as transformers' own mask building does.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

PADDING = -1  # a padding token (the 2D attention mask's False)
CUSTOM = -2  # a token whose pattern is neither causal nor bidirectional within segments


def _pairs(mask_function: Callable, batch_size: int, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """(batch, len(q_idx)) bool: mask_function(b, 0, q_idx[j], kv_idx[j]), vmapped as transformers vmaps custom mask
    functions (indexing a tensor with a 0-d index tensor needs TransformGetItemToIndex under vmap)."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    head = torch.zeros((), dtype=q_idx.dtype, device=q_idx.device)

    def one(b, q, kv):
        return torch.as_tensor(mask_function(b, head, q, kv), dtype=torch.bool, device=q_idx.device)

    over_pairs = torch.vmap(one, in_dims=(None, 0, 0))
    over_batch = torch.vmap(over_pairs, in_dims=(0, None, None))
    with TransformGetItemToIndex():
        return over_batch(torch.arange(batch_size, device=q_idx.device), q_idx, kv_idx)


def segment_ids(mask_function: Callable, batch_size: int, seqlen: int, padding: torch.Tensor | None,
                device: torch.device) -> torch.Tensor:
    """Segment ids (module docstring) of `mask_function` over `seqlen` queries and as many keys at the same positions
    (no cache); `padding` (batch, seqlen) bool is True on real tokens, or None."""
    real = torch.ones(batch_size, seqlen, dtype=torch.bool, device=device) if padding is None else padding.bool()
    if seqlen <= 1:
        return torch.where(real, 0, PADDING).to(torch.int32)
    i = torch.arange(1, seqlen, device=device)
    sees_prev = _pairs(mask_function, batch_size, i, i - 1)  # (batch, seqlen - 1): query i sees key i - 1
    sees_next = _pairs(mask_function, batch_size, i - 1, i)  # query i - 1 sees key i
    both_real = real[:, 1:] & real[:, :-1]
    # A segment starts at a row's first token, after a padding token, and where the previous key is not visible.
    starts = torch.ones_like(real)
    starts[:, 1:] = ~sees_prev | ~real[:, :-1]
    ids = starts.cumsum(-1, dtype=torch.int32) - 1
    ids = torch.where(real, ids, PADDING)
    # Causal: no pair sees its next key. Bidirectional within segments: next visible exactly where previous is.
    bidirectional = ~(both_real & (sees_next != sees_prev)).any()
    custom = both_real & sees_next & ~bidirectional
    custom_tokens = torch.zeros_like(real)
    custom_tokens[:, 1:] |= custom
    custom_tokens[:, :-1] |= custom
    return torch.where(custom_tokens, CUSTOM, ids).to(torch.int32)
