"""fa3nn.testing's own inputs checks: padding masks (bool or Hugging Face's 0/1 int64), attention_ref's masks and the
error-ratio rule's dtypes. A kit that accepts a wrong input passes wrong kernels."""

import pytest
import torch

from fa3nn.testing import pad, random_padding_mask, unpad


def test_unpad_and_pad_take_hugging_face_int_masks():
    """An int64 0/1 attention_mask indexed as is gathers rows 0 and 1 (a (batch, seqlen, seqlen, ...) "packed"
    tensor); it must pack exactly as the bool mask."""
    x = torch.randn(2, 5, 2, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    packed, cu_seqlens, max_seqlen = unpad(x, mask)
    packed_bool, cu_bool, max_bool = unpad(x, mask.bool())
    assert packed.shape == (8, 2, 8) and torch.equal(packed, packed_bool)
    assert torch.equal(cu_seqlens, cu_bool) and cu_seqlens.tolist() == [0, 3, 8] and max_seqlen == max_bool == 5
    assert torch.equal(pad(packed, mask), pad(packed, mask.bool()))
    assert torch.equal(pad(packed, mask)[0, :3], x[0, :3]) and pad(packed, mask)[0, 3:].abs().sum() == 0


@pytest.mark.parametrize("mask, error", [
    (torch.ones(2, 5), "padding_mask must be bool or 0/1 integers"),  # float: an obscure IndexError before
    (torch.tensor([[1, 2, 1, 0, 0]] * 2), "must hold only 0 and 1"),
    (torch.ones(2, 4, dtype=torch.bool), r"padding_mask must have shape \(batch, seqlen\) = \(2, 5\)"),
    (torch.ones(2, 5, 1, dtype=torch.bool), r"padding_mask must have shape \(batch, seqlen\)"),
], ids=["float", "values", "seqlen", "rank"])
def test_unpad_and_pad_refuse_bad_masks(mask, error):
    with pytest.raises((TypeError, ValueError), match=error):
        unpad(torch.randn(2, 5, 2, 8), mask)
    with pytest.raises((TypeError, ValueError), match="padding_mask"):  # pad's shape is the mask's: it counts tokens
        pad(torch.randn(4, 2, 8), mask)


def test_random_padding_mask_of_no_sequences():
    mask = random_padding_mask(0, 5)
    assert mask.shape == (0, 5) and mask.dtype == torch.bool
    assert random_padding_mask(3, 4)[0].all()  # the first sequence is full
