"""fa3nn.testing's own inputs checks: padding masks (bool or Hugging Face's 0/1 int64), attention_ref's masks and the
error-ratio rule's dtypes. A kit that accepts a wrong input passes wrong kernels."""

import pytest
import torch

from fa3nn.testing import (
    assert_error_ratio,
    attention_ref,
    error_ratio_report,
    pad,
    random_padding_mask,
    random_qkv,
    unpad,
)


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


def _left_padded(x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """x (batch, seqlen, ...) right-padded to `lengths` with each row's real tokens moved to its end."""
    return torch.stack([row.roll(row.shape[0] - n, 0) for row, n in zip(x, lengths)])


def test_attention_ref_left_padded_masks_are_the_right_padded_sequences():
    """A left-padded mask (Hugging Face generation) is the same sequences: only mask.sum(-1) was read, so it was
    masked as right-padded (keys at the padding attended, real ones dropped)."""
    lengths_q, lengths_k = [3, 5], [4, 6]
    q, k, v = random_qkv(2, 5, 6, 2, 1, 8, torch.float64)
    mask_q = torch.arange(5)[None] < torch.tensor(lengths_q)[:, None]
    mask_k = torch.arange(6)[None] < torch.tensor(lengths_k)[:, None]
    out, lse = attention_ref(q, k, v, mask_q, mask_k, causal=True, window_size=(2, -1))
    left = [_left_padded(t, n) for t, n in ((q, lengths_q), (k, lengths_k), (v, lengths_k))]
    out_left, lse_left = attention_ref(*left, _left_padded(mask_q, lengths_q), _left_padded(mask_k, lengths_k).long(),
                                       causal=True, window_size=(2, -1))
    torch.testing.assert_close(out_left, _left_padded(out, lengths_q))
    torch.testing.assert_close(lse_left, _left_padded(lse.transpose(1, 2), lengths_q).transpose(1, 2))


@pytest.mark.parametrize("name", ["query_padding_mask", "key_padding_mask"])
@pytest.mark.parametrize("mask, error", [
    (torch.ones(2, 4, dtype=torch.bool), "must have shape"),  # silently dropped keys 4 and 5 before
    (torch.ones(2, 6), "must be bool or 0/1 integers"),
], ids=["shape", "float"])
def test_attention_ref_refuses_bad_masks(name, mask, error):
    q, k, v = random_qkv(2, 6, 6, 2, 2, 8, torch.float32)
    with pytest.raises((TypeError, ValueError), match=f"{name} {error}"):
        attention_ref(q, k, v, **{name: mask})


@pytest.mark.parametrize("name", ["actual", "ref", "pt"])
@pytest.mark.parametrize("bad", [torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.bool),
                                 torch.ones(3, dtype=torch.complex64), [1.0, 1.0, 1.0]], ids=["int", "bool", "complex",
                                                                                             "list"])
def test_error_ratio_refuses_non_floating_tensors(name, bad):
    """Integer and bool tensors passed off-by-one values (their "noise" was the rounding of r + 0.3)."""
    tensors = {"actual": torch.zeros(3), "ref": torch.zeros(3), "pt": torch.zeros(3), name: bad}
    with pytest.raises(TypeError, match=f"{name} must be a floating-point torch.Tensor"):
        error_ratio_report(**tensors)
    with pytest.raises(TypeError, match=name):
        assert_error_ratio(**tensors)


@pytest.mark.parametrize("ratio", [-1.0, float("nan"), float("inf"), True, "2"], ids=str)
def test_error_ratio_refuses_a_ratio_that_is_not_a_finite_number(ratio):
    """ratio was taken as given: NaN made every bound NaN (every tensor failed, reporting "bound nan"), a negative
    one could put the bound below 0; now refused, naming ratio. 0 and other finite ratios still work."""
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="ratio must be a finite number >= 0"):
        error_ratio_report(x, x, x, ratio=ratio)
    assert error_ratio_report(x, x, x, ratio=0)[0] and error_ratio_report(x, x, x, ratio=3)[0]


def test_attention_ref_keeps_its_precision_under_autocast():
    """The oracle under a caller's torch.autocast is the oracle without it, out and lse bit for bit (its float32
    einsums had run in bf16 there: bf16 inputs' out error against float64 9.7e-4 -> 4.9e-3 at seqlen 512)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 64, 4, 32, generator=gen, dtype=torch.bfloat16) for _ in range(3))
    plain = attention_ref(q, k, v, causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = attention_ref(q, k, v, causal=True)
    for got, want in zip(autocast, plain):
        assert got.dtype == want.dtype and torch.equal(got, want)
