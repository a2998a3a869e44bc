"""fa3nn.integrations.hf_mask_probe: segment ids read from a transformers-style mask function, against the mask that
function describes evaluated at every (query, key) pair. End to end through transformers: tests/test_hf.py
(test_packing_seen_by_the_mask_equals_eager, test_custom_overlay_through_transformers_is_refused)."""

from __future__ import annotations

import pytest
import torch

from fa3nn.integrations.hf_mask_probe import CUSTOM, PADDING, segment_ids
from fa3nn.integrations.hf_padding import pack_by_segments

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


def from_segments(ids, pattern):
    """The mask fa3nn runs for segment ids: each segment alone, under the layer's own causal / window pattern."""
    same = (ids[:, :, None] == ids[:, None, :]) & (ids[:, None, :] >= 0)
    return same & dense(pattern)


def _sequence_index(lengths_per_row):
    return torch.stack([torch.cat([torch.full((n,), i) for i, n in enumerate(row)]) for row in lengths_per_row])


PACKING = _sequence_index([(5, 9, 6), (20,), (1, 12, 7)])
LEFT = torch.tensor([0, 4, 7])
LEFT_PADDED = torch.arange(SEQLEN)[None, :] >= LEFT[:, None]
RIGHT_PADDED = torch.arange(SEQLEN)[None, :] < torch.tensor([20, 11, 3])[:, None]

CASES = {  # name: (mask function, padding, the layer's own pattern)
    "causal": (causal, None, causal),
    "causal, left padding": (causal, LEFT_PADDED, causal),
    "sliding": (sliding(4), None, sliding(4)),
    "packed": (both(causal, packed(PACKING)), None, causal),
    "packed sliding": (both(sliding(4), packed(PACKING)), None, sliding(4)),
    "chunked": (chunked(6, torch.zeros(BATCH, dtype=torch.long)), None, causal),
    "chunked, left padding": (chunked(6, LEFT), LEFT_PADDED, causal),
    "chunked, right padding": (chunked(6, torch.zeros(BATCH, dtype=torch.long)), RIGHT_PADDED, causal),
    "packed chunked": (both(chunked(6, torch.zeros(BATCH, dtype=torch.long)), packed(PACKING)), None, causal),
    "window of one": (sliding(1), None, sliding(1)),
    "bidirectional": (lambda b, h, q, kv: torch.ones_like(q, dtype=torch.bool) & (kv >= 0), None,
                      lambda b, h, q, kv: torch.ones_like(q, dtype=torch.bool) & (kv >= 0)),
    "bidirectional packed": (packed(PACKING), RIGHT_PADDED, lambda b, h, q, kv: torch.ones_like(q, dtype=torch.bool)),
}


@pytest.mark.parametrize("case", CASES)
def test_segments_reproduce_the_mask(case):
    """Wherever a query is a real token, the mask fa3nn runs from the segment ids is the mask function's own."""
    mask_function, padding, pattern = CASES[case]
    ids = segment_ids(mask_function, BATCH, SEQLEN, padding, torch.device("cpu"))
    assert ids.dtype == torch.int32 and ids.shape == (BATCH, SEQLEN)
    real = torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding
    assert torch.equal(ids < 0, ~real) and not (ids == CUSTOM).any()
    expected = dense(mask_function) & real[:, None, :]
    assert torch.equal(from_segments(ids, pattern)[real], expected[real])


def test_segments_of_packing():
    ids = segment_ids(both(causal, packed(PACKING)), BATCH, SEQLEN, RIGHT_PADDED, torch.device("cpu"))
    assert ids[0].tolist() == [0] * 5 + [1] * 9 + [2] * 6
    assert ids[1].tolist() == [0] * 11 + [PADDING] * 9  # padding ends the row's one sequence
    assert ids[2].tolist() == [0, 1, 1] + [PADDING] * 17


def test_a_pattern_boundaries_cannot_express_is_marked():
    """Image blocks that see each other both ways inside a causal row (Gemma 3): their tokens are CUSTOM, and packing
    them refuses with a message that names the way out."""
    block_ids = torch.full((BATCH, SEQLEN), -1)
    block_ids[1, 4:9] = 0
    ids = segment_ids(either(causal, blocks(block_ids)), BATCH, SEQLEN, None, torch.device("cpu"))
    assert torch.equal(ids == CUSTOM, block_ids >= 0)
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    with pytest.raises(NotImplementedError, match=r"see keys after them .* attn_implementation='sdpa' or 'eager'"):
        pack_by_segments(q, k, v, ids)
    text_only = segment_ids(either(causal, blocks(torch.full((BATCH, SEQLEN), -1))), BATCH, SEQLEN, None,
                            torch.device("cpu"))
    assert pack_by_segments(q, k, v, text_only) is None  # no image token: a plain dense call


def test_pack_by_segments_layouts():
    """Segments without padding are views of q / k / v; with padding the real rows are gathered; padding alone runs as
    the padding mask does (right padding: slots); one sequence per row: dense."""
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    packing = pack_by_segments(q, k, v, segment_ids(both(causal, packed(PACKING)), BATCH, SEQLEN, None,
                                                    torch.device("cpu")))
    assert packing.query_rows is None and packing.q.data_ptr() == q.data_ptr()
    assert packing.cu_seqlens_q.tolist() == [0, 5, 14, 20, 40, 41, 53, 60] and packing.max_seqlen_q == 20
    gathered = pack_by_segments(q, k, v, segment_ids(both(chunked(6, LEFT), packed(PACKING)), BATCH, SEQLEN,
                                                     LEFT_PADDED, torch.device("cpu")))
    assert gathered.query_rows is not None and gathered.q.shape[0] == int(LEFT_PADDED.sum())
    right = pack_by_segments(q, k, v, segment_ids(causal, BATCH, SEQLEN, RIGHT_PADDED, torch.device("cpu")))
    assert right.query_rows is None and right.cu_seqlens_q.shape[0] == 3 * BATCH + 1  # three per slot
    with pytest.raises(ValueError, match=r"segment ids of shape \(3, 19\)"):
        pack_by_segments(q, k, v, torch.zeros(BATCH, SEQLEN - 1, dtype=torch.int32))
