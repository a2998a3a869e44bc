"""fa3nn.integrations.hf_mask_probe / hf_layout: the layout (segments, bidirectional blocks) read from a
transformers-style mask function, against the mask that function describes evaluated at every (query, key) pair; the
calls hf_layout makes of it against attention_ref under that mask. End to end through transformers:
tests/test_hf.py (packing through the mask, Gemma 3's image tokens, an overlay fa3nn cannot run)."""

from __future__ import annotations

import pytest
import torch

from fa3nn.integrations.hf_layout import pack_by_layout
from fa3nn.integrations.hf_mask_probe import CUSTOM, NO_BLOCK, PADDING, mask_layout

BATCH, SEQLEN = 3, 20


# Mask functions of transformers' form (batch, head, q, kv) -> bool, written here from their definitions so that the
# oracle does not depend on the installed version's names.
def causal(b, h, q, kv):
    return kv <= q


def sliding(window):
    return lambda b, h, q, kv: (kv <= q) & (q - kv < window)


def chunked(size, left_padding):
    return lambda b, h, q, kv: (kv <= q) & ((kv - left_padding[b]) // size == (q - left_padding[b]) // size)


def packed(sequence_index):
    return lambda b, h, q, kv: sequence_index[b, q] == sequence_index[b, kv]


def both(f, g):
    return lambda *idx: f(*idx) & g(*idx)


def either(f, g):
    return lambda *idx: f(*idx) | g(*idx)


def blocks(block_ids):  # Gemma 3's image tokens: a block of tokens that see each other both ways
    return lambda b, h, q, kv: (block_ids[b, q] >= 0) & (block_ids[b, q] == block_ids[b, kv])


def dense(mask_function):
    """(batch, seqlen, seqlen) bool: the function at every pair, as transformers' eager / SDPA masks evaluate it."""
    b, q, kv = torch.meshgrid(torch.arange(BATCH), torch.arange(SEQLEN), torch.arange(SEQLEN), indexing="ij")
    return mask_function(b, torch.zeros_like(b), q, kv).expand(BATCH, SEQLEN, SEQLEN)


def from_layout(layout, pattern, window=None):
    """The mask fa3nn runs for a layout: each segment alone under the layer's own causal / window pattern, and block
    queries non-causal over their segment up to their block's last key, the layer's left window kept."""
    segments, blocks = layout
    positions = torch.arange(SEQLEN)
    same = (segments[:, :, None] == segments[:, None, :]) & (segments[:, None, :] >= 0)
    in_block = blocks >= 0
    last = torch.stack([torch.tensor([int(positions[blocks[b] == blocks[b, i]].max()) if in_block[b, i] else -1
                                      for i in range(SEQLEN)]) for b in range(BATCH)])
    block_keys = positions[None, None, :] <= last[:, :, None]
    if window is not None:
        block_keys = block_keys & (positions[None, :, None] - positions[None, None, :] < window)
    return same & torch.where(in_block[:, :, None], block_keys, dense(pattern))


def _sequence_index(lengths_per_row):
    return torch.stack([torch.cat([torch.full((n,), i) for i, n in enumerate(row)]) for row in lengths_per_row])


PACKING = _sequence_index([(5, 9, 6), (20,), (1, 12, 7)])
LEFT = torch.tensor([0, 4, 7])
LEFT_PADDED = torch.arange(SEQLEN)[None, :] >= LEFT[:, None]
RIGHT_PADDED = torch.arange(SEQLEN)[None, :] < torch.tensor([20, 11, 3])[:, None]
IMAGES = torch.full((BATCH, SEQLEN), -1)  # Gemma 3's block_sequence_ids: two images in row 0, one in row 1
IMAGES[0, 2:6], IMAGES[0, 9:16], IMAGES[1, 12:15] = 0, 1, 0
PREFIX = torch.where(torch.arange(SEQLEN) < torch.tensor([6, 1, 11])[:, None], 0, -1)  # PaliGemma: bidirectional prefix
ZEROS = torch.zeros(BATCH, dtype=torch.long)
EVERYWHERE = lambda b, h, q, kv: torch.ones_like(q - kv, dtype=torch.bool)  # noqa: E731

CASES = {  # name: (mask function, padding, the layer's own pattern, its window)
    "causal": (causal, None, causal, None),
    "causal, left padding": (causal, LEFT_PADDED, causal, None),
    "sliding": (sliding(4), None, sliding(4), 4),
    "packed": (both(causal, packed(PACKING)), None, causal, None),
    "packed sliding": (both(sliding(4), packed(PACKING)), None, sliding(4), 4),
    "chunked": (chunked(6, ZEROS), None, causal, None),
    "chunked, left padding": (chunked(6, LEFT), LEFT_PADDED, causal, None),
    "chunked, right padding": (chunked(6, ZEROS), RIGHT_PADDED, causal, None),
    "packed chunked": (both(chunked(6, ZEROS), packed(PACKING)), None, causal, None),
    "window of one": (sliding(1), None, sliding(1), 1),
    "bidirectional": (EVERYWHERE, None, EVERYWHERE, None),
    "bidirectional packed": (packed(PACKING), RIGHT_PADDED, EVERYWHERE, None),
    "image blocks": (either(causal, blocks(IMAGES)), None, causal, None),
    "image blocks, left padding": (either(causal, blocks(IMAGES)), LEFT_PADDED, causal, None),
    "image blocks, sliding": (both(either(causal, blocks(IMAGES)), lambda b, h, q, kv: q - kv < 4), None,
                              sliding(4), 4),
    "image blocks, packed": (both(either(causal, blocks(IMAGES)), packed(PACKING)), None, causal, None),
    "bidirectional prefix": (either(causal, blocks(PREFIX)), RIGHT_PADDED, causal, None),
}


@pytest.mark.parametrize("case", CASES)
def test_layout_reproduces_the_mask(case):
    """Wherever a query is a real token, the mask fa3nn runs from the layout is the mask function's own."""
    mask_function, padding, pattern, window = CASES[case]
    layout = mask_layout(mask_function, BATCH, SEQLEN, padding, torch.device("cpu"))
    assert layout.dtype == torch.int32 and layout.shape == (2, BATCH, SEQLEN)
    real = torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding
    assert torch.equal(layout[0] < 0, ~real) and not (layout[0] == CUSTOM).any()
    expected = dense(mask_function) & real[:, None, :]
    assert torch.equal(from_layout(layout, pattern, window)[real], expected[real])
    assert ((layout[1] >= 0).any()) == ("block" in case or "prefix" in case)


def test_segments_of_packing():
    segments, blocks = mask_layout(both(causal, packed(PACKING)), BATCH, SEQLEN, RIGHT_PADDED, torch.device("cpu"))
    assert segments[0].tolist() == [0] * 5 + [1] * 9 + [2] * 6
    assert segments[1].tolist() == [0] * 11 + [PADDING] * 9  # padding ends the row's one sequence
    assert segments[2].tolist() == [0, 1, 1] + [PADDING] * 17
    assert (blocks == NO_BLOCK).all()


def test_blocks_of_images():
    segments, block_ids = mask_layout(either(causal, blocks(IMAGES)), BATCH, SEQLEN, None, torch.device("cpu"))
    assert (segments == 0).all()
    assert block_ids[0].tolist() == [-1, -1] + [0] * 4 + [-1] * 3 + [1] * 7 + [-1] * 4
    assert block_ids[1].tolist() == [-1] * 12 + [2] * 3 + [-1] * 5 and (block_ids[2] == NO_BLOCK).all()


@pytest.mark.parametrize("shape", ["look-ahead by one", "a block's end unseen", "seen but not seeing"])
def test_patterns_fa3nn_cannot_run_are_marked_and_refused(shape):
    """Future keys visible in shapes that are neither packing nor bidirectional blocks: their tokens are CUSTOM, and
    the attention refuses with a message that names the way out."""
    if shape == "look-ahead by one":  # each query sees the next key: neighbours link, but no block's end is seen
        mask_function = lambda b, h, q, kv: kv <= q + 1  # noqa: E731
    elif shape == "a block's end unseen":  # a run of linked tokens whose first query does not see its last key
        mask_function = either(causal, lambda b, h, q, kv: (q >= 4) & (q <= 8) & (kv == q + 1))
    else:  # query 3 sees key 4, key 3 is invisible to query 4
        mask_function = lambda b, h, q, kv: ((kv <= q) & ~((q == 4) & (kv == 3))) | ((q == 3) & (kv == 4))  # noqa: E731
    layout = mask_layout(mask_function, BATCH, SEQLEN, None, torch.device("cpu"))
    assert (layout[0] == CUSTOM).any()
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    with pytest.raises(NotImplementedError, match=r"see keys after them .* attn_implementation='sdpa' or 'eager'"):
        pack_by_layout(q, k, v, layout)


def test_pack_by_layout_shapes():
    """Segments without padding are views of q / k / v; with padding the real rows are gathered; padding alone runs as
    the padding mask does (right padding: slots); one sequence per row: dense; blocks: one packed sequence each, from
    the segment's first key to the block's last."""
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    cpu = torch.device("cpu")
    layout = mask_layout(both(causal, packed(PACKING)), BATCH, SEQLEN, None, cpu)
    packing, no_blocks, bidirectional = pack_by_layout(q, k, v, layout)
    assert no_blocks is None and not bidirectional
    assert packing.query_rows is None and packing.q.data_ptr() == q.data_ptr()
    assert packing.cu_seqlens_q.tolist() == [0, 5, 14, 20, 40, 41, 53, 60] and packing.max_seqlen_q == 20
    gathered, _, _ = pack_by_layout(q, k, v, mask_layout(both(chunked(6, LEFT), packed(PACKING)), BATCH, SEQLEN,
                                                      LEFT_PADDED, cpu))
    assert gathered.query_rows is not None and gathered.q.shape[0] == int(LEFT_PADDED.sum())
    right, _, _ = pack_by_layout(q, k, v, mask_layout(causal, BATCH, SEQLEN, RIGHT_PADDED, cpu))
    assert right.query_rows is None and right.cu_seqlens_q.shape[0] == 3 * BATCH + 1  # three per slot
    dense_call, _, _ = pack_by_layout(q, k, v, mask_layout(either(causal, blocks(torch.full((BATCH, SEQLEN), -1))),
                                                        BATCH, SEQLEN, None, cpu))
    assert dense_call is None  # no image token: a plain dense call
    _, images, _ = pack_by_layout(q, k, v, mask_layout(both(either(causal, blocks(IMAGES)), packed(PACKING)), BATCH,
                                                    SEQLEN, None, cpu))
    # row 0's images at 2:6 (sequence 0 from 0) and 9:16 (sequence 1 from 5, up to 14: the packing splits the block)
    assert images.cu_seqlens_q.tolist() == [0, 3, 8, 10, 13] and images.cu_seqlens_k.tolist() == [0, 5, 14, 16, 31]
    with pytest.raises(ValueError, match=r"a mask layout of shape \(2, 3, 19\)"):
        pack_by_layout(q, k, v, torch.zeros(2, BATCH, SEQLEN - 1, dtype=torch.int32))


CALL_CASES = ("image blocks", "image blocks, sliding", "image blocks, packed", "bidirectional prefix",
              "image blocks, left padding", "bidirectional packed", "packed")


@pytest.mark.parametrize("case", CALL_CASES)
def test_calls_equal_attention_under_the_mask(case):
    """What patch_hf's attention runs for a layout (segments; blocks' rows again, non-causal) against softmax
    attention under the dense mask, float64, forward and gradients, in a layer flagged causal: a bidirectional
    mask runs non-causal there (the mask decides, as in eager and SDPA)."""
    from fa3nn.integrations.hf import fa3nn_attention_forward

    mask_function, padding, pattern, window = CASES[case]
    layout = mask_layout(mask_function, BATCH, SEQLEN, padding, torch.device("cpu"))
    real = torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding
    q = torch.randn(BATCH, 4, SEQLEN, 16, dtype=torch.float64, requires_grad=True)  # transformers' (b, h, s, d)
    k = torch.randn(BATCH, 2, SEQLEN, 16, dtype=torch.float64, requires_grad=True)
    v = torch.randn(BATCH, 2, SEQLEN, 16, dtype=torch.float64, requires_grad=True)
    module = torch.nn.Module()
    module.is_causal = True
    out, _ = fa3nn_attention_forward(module, q, k, v, layout, scaling=0.25, sliding_window=window)
    # the oracle: softmax over the allowed keys of the dense mask, two query heads per key head
    allowed = (dense(mask_function) & real[:, None, :])[:, None]
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k.repeat_interleave(2, dim=1)) * 0.25
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)  # padding rows
    expected = torch.einsum("bhqk,bhkd->bqhd", probs, v.repeat_interleave(2, dim=1))
    torch.testing.assert_close(out[real], expected[real], rtol=1e-10, atol=1e-10)
    weights = torch.randn(out.shape, dtype=torch.float64) * real[..., None, None]
    grads = torch.autograd.grad((out * weights).sum(), (q, k, v))
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v))
    for actual, wanted in zip(grads, expected_grads):
        torch.testing.assert_close(actual, wanted, rtol=1e-10, atol=1e-10)
