"""fa3nn.integrations.hf_mask_probe / hf_layout: the layout (segments, bidirectional blocks) read from a
transformers-style mask function, against the mask that function describes evaluated at every (query, key) pair; the
calls hf_layout makes of it against attention_ref under that mask. End to end through transformers:
tests/test_hf.py (packing through the mask, Gemma 3's image tokens, an overlay fa3nn cannot run)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from fa3nn.integrations.hf_layout import pack_by_layout
from fa3nn.integrations.hf_mask_probe import CUSTOM, NO_BLOCK, PADDING, mask_layout, witness_distances

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
HOLES = LEFT_PADDED.clone()
HOLES[0, 7:9] = HOLES[2, 12] = False  # padding inside rows too (fa3nn's padded layouts include it)
IMAGES = torch.full((BATCH, SEQLEN), -1)  # Gemma 3's block_sequence_ids: two images in row 0, one in row 1
IMAGES[0, 2:6], IMAGES[0, 9:16], IMAGES[1, 12:15] = 0, 1, 0
PREFIX = torch.where(torch.arange(SEQLEN) < torch.tensor([6, 1, 11])[:, None], 0, -1)  # PaliGemma: bidirectional prefix
ZEROS = torch.zeros(BATCH, dtype=torch.long)
EVERYWHERE = lambda b, h, q, kv: torch.ones_like(q - kv, dtype=torch.bool)  # noqa: E731


def symmetric(window):  # ModernBERT's local layers: |q - kv| < window
    return lambda b, h, q, kv: (q - kv < window) & (kv - q < window)


CASES = {  # name: (mask function, padding, the layer's own pattern, its sliding_window, its attention_chunk)
    "causal": (causal, None, causal, None, 0),
    "causal, left padding": (causal, LEFT_PADDED, causal, None, 0),
    "causal, holes": (causal, HOLES, causal, None, 0),
    "sliding": (sliding(4), None, sliding(4), 4, 0),
    "packed": (both(causal, packed(PACKING)), None, causal, None, 0),
    "packed, holes": (both(causal, packed(PACKING)), HOLES, causal, None, 0),
    "packed sliding": (both(sliding(4), packed(PACKING)), None, sliding(4), 4, 0),
    "chunked": (chunked(6, ZEROS), None, causal, None, 6),
    "chunked, left padding": (chunked(6, LEFT), LEFT_PADDED, causal, None, 6),
    "chunked, right padding": (chunked(6, ZEROS), RIGHT_PADDED, causal, None, 6),
    "packed chunked": (both(chunked(6, ZEROS), packed(PACKING)), None, causal, None, 6),
    "window of one": (sliding(1), None, sliding(1), 1, 0),
    "bidirectional": (EVERYWHERE, None, EVERYWHERE, None, 0),
    "bidirectional, holes": (EVERYWHERE, HOLES, EVERYWHERE, None, 0),
    "bidirectional packed": (packed(PACKING), RIGHT_PADDED, EVERYWHERE, None, 0),
    "bidirectional window": (symmetric(3), RIGHT_PADDED, symmetric(3), 3, 0),
    "image blocks": (either(causal, blocks(IMAGES)), None, causal, None, 0),
    "image blocks, left padding": (either(causal, blocks(IMAGES)), LEFT_PADDED, causal, None, 0),
    "image blocks, holes": (either(causal, blocks(IMAGES)), HOLES, causal, None, 0),
    "image blocks, sliding": (both(either(causal, blocks(IMAGES)), lambda b, h, q, kv: q - kv < 4), None,
                              sliding(4), 4, 0),
    "image blocks, packed": (both(either(causal, blocks(IMAGES)), packed(PACKING)), None, causal, None, 0),
    "bidirectional prefix": (either(causal, blocks(PREFIX)), RIGHT_PADDED, causal, None, 0),
}
CPU = torch.device("cpu")


def _layout(case, index_based=False):
    mask_function, padding, _, _, _ = CASES[case]
    return mask_layout(mask_function, BATCH, SEQLEN, padding, CPU, index_based)


@pytest.mark.parametrize("index_based", [False, True], ids=["vmapped", "broadcast"])
@pytest.mark.parametrize("case", CASES)
def test_layout_reproduces_the_mask(case, index_based):
    """Wherever a query is a real token, the mask fa3nn runs from the layout is the mask function's own, and the
    layout passes its own check for the layer's window and chunk; the mask function vmapped or called once on
    broadcast index tensors (transformers 5's use_vmap=False)."""
    mask_function, padding, pattern, window, chunk = CASES[case]
    layout = _layout(case, index_based)
    assert layout.dtype == torch.int32 and layout.shape == (2 + 2 * len(witness_distances(SEQLEN)), BATCH, SEQLEN)
    real = torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding
    assert torch.equal(layout[0] < 0, ~real) and not (layout[0] == CUSTOM).any()
    expected = dense(mask_function) & real[:, None, :]
    assert torch.equal(from_layout(layout[:2], pattern, window)[real], expected[real])
    assert ((layout[1] >= 0).any()) == ("block" in case or "prefix" in case)
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    _, _, causal_call = pack_by_layout(q, k, v, layout, True, window, chunk)  # a layer flagged causal
    if case != "window of one":  # each token sees itself alone: causal and bidirectional at once (either runs it)
        assert causal_call == (not case.startswith("bidirectional") or "prefix" in case)


def test_segments_of_packing():
    segments, blocks = mask_layout(both(causal, packed(PACKING)), BATCH, SEQLEN, RIGHT_PADDED, CPU)[:2]
    assert segments[0].tolist() == [0] * 5 + [1] * 9 + [2] * 6
    assert segments[1].tolist() == [0] * 11 + [PADDING] * 9  # padding ends the row's one sequence
    assert segments[2].tolist() == [0, 1, 1] + [PADDING] * 17
    assert (blocks == NO_BLOCK).all()
    holes = mask_layout(causal, BATCH, SEQLEN, HOLES, CPU)[0]  # a hole does not end a sequence
    assert holes[0].tolist() == [0] * 7 + [PADDING] * 2 + [0] * 11


def test_blocks_of_images():
    segments, block_ids = mask_layout(either(causal, blocks(IMAGES)), BATCH, SEQLEN, None, CPU)[:2]
    assert (segments == 0).all()
    assert block_ids[0].tolist() == [-1, -1] + [0] * 4 + [-1] * 3 + [1] * 7 + [-1] * 4
    assert block_ids[1].tolist() == [-1] * 12 + [2] * 3 + [-1] * 5 and (block_ids[2] == NO_BLOCK).all()


KEEP = torch.ones(BATCH, SEQLEN, dtype=torch.bool)
KEEP[:, 5] = False
REFUSED = {  # name: (mask function, the layer's sliding_window)
    "look-ahead by one": (lambda b, h, q, kv: kv <= q + 1, None),
    "a block's end unseen": (either(causal, lambda b, h, q, kv: (q >= 4) & (q <= 8) & (kv == q + 1)), None),
    "seen but not seeing": (lambda b, h, q, kv: ((kv <= q) & ~((q == 4) & (kv == 3))) | ((q == 3) & (kv == 4)),
                            None),
    "a key dropped": (lambda b, h, q, kv: (kv <= q) & KEEP[b, kv], None),
    "sink tokens": (either(sliding(4), lambda b, h, q, kv: kv < 2), 4),
    "every second key": (lambda b, h, q, kv: (kv <= q) & ((q - kv) % 2 == 0), None),
    "another window than the layer's": (sliding(4), 6),
    "a bidirectional window the layer lacks": (symmetric(3), None),
    "a block across the window (OR)": (either(sliding(4), blocks(IMAGES)), 4),  # PaliGemma2's sliding composition
    # keys 16 .. 19 back hidden, the layer without a window: only the largest witness distance (16 of 1, 2, 4, 8, 16
    # at SEQLEN 20) sees it; without that one fa3nn ran full causal attention here
    "a window only the largest witness sees": (sliding(16), None),
}


@pytest.mark.parametrize("shape", REFUSED)
def test_masks_fa3nn_would_run_otherwise_are_refused(shape):
    """Shapes that are neither packing nor bidirectional blocks, or that disagree with the layer's own window: the
    structural check (CUSTOM) or the recorded pairs at distances 1, 2, 4, ... catch them, and the attention refuses
    with a message that names the way out, instead of running something else."""
    mask_function, window = REFUSED[shape]
    layout = mask_layout(mask_function, BATCH, SEQLEN, None, CPU)
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    with pytest.raises(NotImplementedError, match=r"(see keys after them|differs from what fa3nn would run) .*"
                                                  r"attn_implementation='sdpa' or 'eager'"):
        pack_by_layout(q, k, v, layout, True, window, 0)


@pytest.mark.parametrize("mask_function, window, chunk", [
    (sliding(4), 4, 0), (symmetric(3), 3, 0), (chunked(6, ZEROS), None, 6),
    (both(either(causal, blocks(IMAGES)), lambda b, h, q, kv: q - kv < 4), 4, 0),
], ids=["sliding", "bidirectional window", "chunked", "image blocks, sliding"])
def test_holes_under_a_window_are_refused(mask_function, window, chunk):
    """Padding inside a sequence under a window or chunks: fa3nn counts them over the real tokens, transformers over
    positions; the witnesses at 1, 2, 4, ... miss it for most window sizes (ModernBERT's 64: the first differing pair
    is 65 apart), so holes themselves are refused there. Without a window they run (test_calls_equal_...)."""
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)
    with pytest.raises(NotImplementedError, match="padding inside a sequence"):
        pack_by_layout(q, k, v, mask_layout(mask_function, BATCH, SEQLEN, HOLES, CPU), True, window, chunk)


def test_pack_by_layout_shapes():
    """Segments without padding are views of q / k / v; with padding the real rows are gathered; padding alone runs as
    the padding mask does (right padding: slots); bidirectional without a window keeps every query; one sequence per
    row: dense; blocks: one packed sequence each, from the segment's first key to the block's last."""
    q = k = v = torch.randn(BATCH, SEQLEN, 2, 8)

    def pack(mask_function, padding=None, is_causal=True):
        return pack_by_layout(q, k, v, mask_layout(mask_function, BATCH, SEQLEN, padding, CPU), is_causal, None, 0)

    packing, no_blocks, causal_call = pack(both(causal, packed(PACKING)))
    assert no_blocks is None and causal_call
    assert packing.query_rows is None and packing.q.data_ptr() == q.data_ptr()
    assert packing.cu_seqlens_q.tolist() == [0, 5, 14, 20, 40, 41, 53, 60] and packing.max_seqlen_q == 20
    gathered = pack(both(chunked(6, LEFT), packed(PACKING)), LEFT_PADDED)[0]
    assert gathered.query_rows is not None and gathered.q.shape[0] == int(LEFT_PADDED.sum())
    right = pack(causal, RIGHT_PADDED)[0]
    assert right.query_rows is None and right.cu_seqlens_q.shape[0] == 3 * BATCH + 1  # three per slot
    keys_only, _, causal_call = pack(EVERYWHERE, RIGHT_PADDED)
    assert not causal_call and keys_only.q.shape[0] == BATCH * SEQLEN and keys_only.k.shape[0] == 34
    assert pack(either(causal, blocks(torch.full((BATCH, SEQLEN), -1))))[0] is None  # no image token: dense
    images = pack(both(either(causal, blocks(IMAGES)), packed(PACKING)))[1]
    # row 0's images at 2:6 (sequence 0 from 0) and 9:16 (sequence 1 from 5, up to 14: the packing splits the block)
    assert images.cu_seqlens_q.tolist() == [0, 3, 8, 10, 13] and images.cu_seqlens_k.tolist() == [0, 5, 14, 16, 31]
    with pytest.raises(ValueError, match=r"a mask layout of shape \(2, 3, 19\)"):
        pack_by_layout(q, k, v, torch.zeros(2, BATCH, SEQLEN - 1, dtype=torch.int32), True, None, 0)


CALL_CASES = ("image blocks", "image blocks, sliding", "image blocks, packed", "bidirectional prefix",
              "image blocks, left padding", "image blocks, holes", "bidirectional packed", "bidirectional window",
              "bidirectional, holes", "packed", "packed, holes", "chunked, left padding")


@pytest.mark.parametrize("case", CALL_CASES)
def test_calls_equal_attention_under_the_mask(case):
    """What patch_hf's attention runs for a layout (segments; blocks' rows again, non-causal) against softmax
    attention under the dense mask, float64, forward and gradients, in a layer flagged causal: a bidirectional
    mask runs non-causal there (the mask decides, as in eager and SDPA)."""
    from fa3nn.integrations.hf import fa3nn_attention_forward

    mask_function, padding, pattern, window, chunk = CASES[case]
    layout = _layout(case)
    real = torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding
    q = torch.randn(BATCH, 4, SEQLEN, 16, dtype=torch.float64, requires_grad=True)  # transformers' (b, h, s, d)
    k = torch.randn(BATCH, 2, SEQLEN, 16, dtype=torch.float64, requires_grad=True)
    v = torch.randn(BATCH, 2, SEQLEN, 16, dtype=torch.float64, requires_grad=True)
    module = torch.nn.Module()
    module.is_causal = True
    module.config, module.layer_idx = SimpleNamespace(attention_chunk_size=chunk or None,
                                                      layer_types=["chunked_attention"]), 0
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


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["image blocks", "image blocks, sliding", "packed", "bidirectional window",
                                  "bidirectional packed", "chunked, left padding", "image blocks, left padding"])
def test_calls_on_the_gpu(case):
    """The same calls on CUDA in bf16 through auto's backends (never run on a GPU before this test): the layout's
    checks and packing on CUDA tensors, the packed call and the blocks' second call, forward and gradients by the
    error-ratio rule against softmax attention under the dense mask (float64 truth; the same computed in bf16, as
    FlashAttention's tests do, as the yardstick)."""
    import fa3nn
    from fa3nn.integrations.hf import fa3nn_attention_forward
    from fa3nn.testing import assert_error_ratio

    fa3nn.patch_hf()  # registers auto's defaults (another test may have left backend="reference" registered)
    mask_function, padding, pattern, window, chunk = CASES[case]
    cuda = torch.device("cuda")
    real = (torch.ones(BATCH, SEQLEN, dtype=torch.bool) if padding is None else padding).to(cuda)
    layout = _layout(case).to(cuda)  # read on the CPU (the builders here hold CPU tensors); tests/test_hf.py reads
    # transformers' own masks on the GPU
    q, k, v = (torch.randn(BATCH, h, SEQLEN, 64, device=cuda).to(torch.bfloat16).requires_grad_()
               for h in (4, 2, 2))
    module = torch.nn.Module()
    module.is_causal = True
    module.config, module.layer_idx = SimpleNamespace(attention_chunk_size=chunk or None,
                                                      layer_types=["chunked_attention"]), 0
    out, _ = fa3nn_attention_forward(module, q, k, v, layout, scaling=0.125, sliding_window=window)
    allowed = (dense(mask_function).to(cuda) & real[:, None, :])[:, None]
    weights = torch.randn(out.shape, device=cuda, dtype=torch.float64) * real[..., None, None]

    def oracle(dtype):
        leaves = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
        scores = torch.einsum("bhqd,bhkd->bhqk", leaves[0], leaves[1].repeat_interleave(2, dim=1)) * 0.125
        probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
        o = torch.einsum("bhqk,bhkd->bqhd", probs, leaves[2].repeat_interleave(2, dim=1))
        return o, torch.autograd.grad((o.double() * weights).sum(), leaves)

    grads = torch.autograd.grad((out.double() * weights).sum(), (q, k, v))
    (ref, ref_grads), (pt, pt_grads) = oracle(torch.float64), oracle(torch.bfloat16)
    # the tested tensors in their own dtype: the rule's noise floor is bf16's
    assert_error_ratio(out[real], ref[real], pt[real], f"{case}: out")
    for name, g, r, p in zip("qkv", grads, ref_grads, pt_grads):
        assert_error_ratio(g, r, p, f"{case}: d{name}")



@pytest.mark.parametrize("index_based", [False, True], ids=["vmapped", "broadcast"])
@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding"])
def test_layout_of_an_empty_batch(index_based, padded):
    padding = torch.ones(0, SEQLEN, dtype=torch.bool) if padded else None
    layout = mask_layout(causal, 0, SEQLEN, padding, CPU, index_based)
    assert layout.shape == (2 + 2 * len(witness_distances(SEQLEN)), 0, SEQLEN) and layout.dtype == torch.int32
