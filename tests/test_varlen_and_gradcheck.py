"""Packed (varlen) batches against the equivalent padded batch, float64 gradcheck, and empty inputs."""

import pytest
import torch

import fa3nn
from fa3nn.testing import assert_error_ratio, attention_ref, pad, random_padding_mask, random_qkv, unpad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal,window_size,softcap", [(False, (-1, -1), 0.0), (True, (-1, -1), 0.0),
                                                         (True, (24, -1), 8.0), (False, (10, 3), 0.0)])
@pytest.mark.parametrize("seqlens", [(61, 61), (40, 97), (97, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_varlen_matches_padded_batch(dtype, causal, window_size, softcap, seqlens):
    batch, (max_q, max_k) = 5, seqlens
    q, k, v = random_qkv(batch, max_q, max_k, 6, 2, 32, dtype)
    mask_q = random_padding_mask(batch, max_q)  # lengths may be 0; sequence 0 is full
    mask_k = random_padding_mask(batch, max_k)
    q_packed, cu_q, maxlen_q = unpad(q, mask_q)
    k_packed, cu_k, maxlen_k = unpad(k, mask_k)
    v_packed, _, _ = unpad(v, mask_k)
    leaves = [t.detach().requires_grad_() for t in (q_packed, k_packed, v_packed)]
    kwargs = dict(causal=causal, window_size=window_size, softcap=softcap)
    out, lse = fa3nn.flash_attn_varlen_func(*leaves, cu_q, cu_k, maxlen_q, maxlen_k, return_lse=True, **kwargs)
    assert out.shape == q_packed.shape and lse.shape == (6, q_packed.shape[0])

    padded = [pad(t, m).detach().requires_grad_() for t, m in zip(leaves, (mask_q, mask_k, mask_k))]
    out_ref, lse_ref = attention_ref(*padded, mask_q, mask_k, **kwargs)
    out_pt, lse_pt = attention_ref(*padded, mask_q, mask_k, upcast=False, reorder_ops=True, **kwargs)
    assert_error_ratio(out, out_ref[mask_q], out_pt[mask_q], "out")
    assert_error_ratio(lse, lse_ref.transpose(1, 2)[mask_q].T, lse_pt.transpose(1, 2)[mask_q].T, "lse")

    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, leaves, dout)
    grads_ref = torch.autograd.grad(out_ref, padded, pad(dout, mask_q))
    grads_pt = torch.autograd.grad(out_pt, padded, pad(dout, mask_q))
    for name, g, g_ref, g_pt, m in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt, (mask_q, mask_k, mask_k)):
        assert_error_ratio(g, g_ref[m], g_pt[m], name)


def finite_lse(lse):
    """lse is -inf on rows that attend no key; finite differences of -inf are NaN, so check those rows as 0."""
    return torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)


GRADCHECK_CASES = {
    "plain": dict(),
    "causal_gqa": dict(causal=True),
    "window": dict(window_size=(2, 1)),
    "softcap_causal_local": dict(causal=True, window_size=(3, -1), softcap=2.0),
}


@pytest.mark.parametrize("case", list(GRADCHECK_CASES))
@pytest.mark.parametrize("seqlens", [(5, 7), (7, 3)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_gradcheck_float64(case, seqlens):
    q, k, v = random_qkv(2, *seqlens, 4, 2, 8, torch.float64, requires_grad=True)

    def f(q, k, v):
        out, lse = fa3nn.flash_attn_func(q, k, v, return_lse=True, **GRADCHECK_CASES[case])
        return out, finite_lse(lse)

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_gradcheck_varlen_float64():
    lengths_q, lengths_k = [3, 0, 5], [4, 2, 5]
    cu_q = torch.tensor([0, 3, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 6, 11], dtype=torch.int32)
    q = torch.randn(sum(lengths_q), 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(sum(lengths_k), 2, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(sum(lengths_k), 2, 8, dtype=torch.float64, requires_grad=True)

    def f(q, k, v):
        out, lse = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, causal=True, softcap=3.0, return_lse=True)
        return out, finite_lse(lse)

    assert torch.autograd.gradcheck(f, (q, k, v))


@pytest.mark.parametrize("shape_q,shape_k", [((2, 0, 4, 16), (2, 9, 2, 16)), ((0, 5, 4, 16), (0, 5, 2, 16))])
def test_empty_queries_return_empty(shape_q, shape_k):
    q, k = torch.randn(shape_q, requires_grad=True), torch.randn(shape_k, requires_grad=True)
    v = torch.randn(shape_k, requires_grad=True)
    out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, return_lse=True)
    assert out.shape == shape_q and lse.shape == (shape_q[0], shape_q[2], shape_q[1])
    out.sum().backward()
    assert q.grad.shape == q.shape and k.grad.abs().sum() == 0


def test_no_keys_gives_zeros_and_neg_inf():
    q, k, v = torch.randn(2, 3, 4, 16), torch.randn(2, 0, 2, 16), torch.randn(2, 0, 2, 16)
    out, lse = fa3nn.flash_attn_func(q, k, v, return_lse=True)
    assert torch.equal(out, torch.zeros_like(q)) and torch.isneginf(lse).all()


def test_sinks_without_any_key():
    """A call with no key at all takes the empty-call path (no backend runs): out 0 and lse the sink on every row, so
    d(sum lse) / d sink is the number of rows, 2 x 5 = 10 per head here. Its backward's zero gradients for q, k and v
    are right; a zero sink gradient there passed every other test."""
    q = torch.randn(2, 5, 3, 8, dtype=torch.float64)
    k = v = torch.randn(2, 0, 3, 8, dtype=torch.float64)
    sinks = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out, lse = fa3nn.flash_attn_func(q, k, v, sinks=sinks, return_lse=True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(lse, sinks.detach()[None, :, None].expand(2, 3, 5))
    (dsinks,) = torch.autograd.grad(lse.sum(), sinks)
    assert dsinks.tolist() == [10.0, 10.0, 10.0]


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "packed"])
def test_gradcheck_with_sinks_float64(dense):
    """fa3nn.sinks.with_sinks (the sinks of the FP8 forward, applied to its out and lse) through out and lse, packed
    with a row that attended no key (lse -inf: out stays 0, lse becomes the sink). Its backward's lse terms (dlse *
    sigmoid(lse - sink) to lse, dlse * (1 - sigmoid) to the sink) were never checked: a loss on out alone does not
    reach them, and the FP8 end-to-end test (tests/test_fp8_api.py, within 10% of bf16) misses a wrong lse term."""
    from fa3nn.sinks import with_sinks

    shape_out, shape_lse = ((2, 5, 3, 4), (2, 3, 5)) if dense else ((7, 3, 4), (3, 7))
    out = torch.randn(*shape_out, dtype=torch.float64, requires_grad=True)
    lse = torch.randn(*shape_lse, dtype=torch.float64)
    if not dense:
        lse[:, 2] = float("-inf")
    sinks = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(with_sinks, (out, lse.requires_grad_(), sinks))


def test_gradgradcheck_reference_float64():
    """The reference backward is torch ops on the saved tensors: a second derivative (gradient penalty) through it
    is exact, dense and packed."""
    q, k, v = random_qkv(1, 4, 5, 2, 1, 8, torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda q, k, v: fa3nn.flash_attn_func(q, k, v, causal=True), (q, k, v))
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    q, k, v = (torch.randn(5, 2, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradgradcheck(lambda q, k, v: fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 3, 3), (q, k, v))


@pytest.mark.parametrize("fp8", [None, "delayed"])
def test_gradient_penalty_through_a_checkpointed_layer(fp8):
    """create_graph=True through torch.utils.checkpoint (non-reentrant): the eager backward unpacked ctx.saved_tensors
    twice (the double-backward check, then the gradients), which checkpoint refuses ('Unpack is being triggered for a
    tensor that was already unpacked once', s59 probe). Now the penalty equals the uncheckpointed one (reference
    backend), and FP8 gets its own refusal at the second derivative."""
    from torch.utils.checkpoint import checkpoint

    grads = []
    for checkpointed in (False, True):
        layer = fa3nn.FlashAttentionV3(causal=True, fp8=fp8, backend="reference").train()
        q, k, v = (torch.randn(1, 8, 2, 8, generator=torch.Generator().manual_seed(i)).requires_grad_()
                   for i in range(3))
        out = checkpoint(layer, q, k, v, use_reentrant=False) if checkpointed else layer(q, k, v)
        first = torch.autograd.grad(out.square().sum(), (q, k, v), create_graph=True)
        penalty = sum(g.square().sum() for g in first)
        if fp8 is not None:
            with pytest.raises(RuntimeError, match="fa3nn FP8 attention does not support double backward"):
                penalty.backward()
            continue
        penalty.backward()
        grads.append([t.grad for t in (q, k, v)])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_double_backward_with_sinks_raises():
    """fa3nn.sinks' gradient detaches the sinks (their second derivative would be wrong), so a penalty on gradients
    taken with create_graph=True raises on differentiation, even with a dout that needs no gradient (out.sum())."""
    q, k, v = random_qkv(1, 3, 3, 2, 2, 4, torch.float64, requires_grad=True)
    sinks = torch.randn(2, dtype=torch.float64, requires_grad=True)
    out = fa3nn.flash_attn_func(q, k, v, sinks=sinks)
    grads = torch.autograd.grad(out.sum(), (q, sinks), create_graph=True)  # first order: fine
    assert all(torch.isfinite(g).all() for g in grads)
    penalty = sum((g * g).sum() for g in grads)
    with pytest.raises(RuntimeError, match="sinks does not support double backward"):
        torch.autograd.grad(penalty, (q, sinks), allow_unused=True)
