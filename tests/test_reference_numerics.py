"""The reference backend against attention_ref by the error-ratio rule: forward, lse and backward, over dtypes, head
dims, (seqlen_q, seqlen_k) pairs, MHA/GQA/MQA, causal, sliding window and softcap."""

import pytest
import torch

import fa3nn
from fa3nn.testing import assert_error_ratio, attention_ref, random_qkv

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HEADDIMS = [32, 64, 96, 128, 192, 256]
SEQLENS = [(1, 1), (17, 113), (113, 203), (239, 1), (128, 128), (1024, 1024)]
HEADS = {"mha": (4, 4), "gqa": (6, 2), "mqa": (3, 1)}
MASKS = {
    "none": (False, (-1, -1)),
    "causal": (True, (-1, -1)),
    "local": (False, (32, 7)),
    "causal_local": (True, (48, -1)),
}


def check_against_ref(q, k, v, backend="reference", **kwargs):
    """Forward (out and lse) and backward (dq, dk, dv) of fa3nn against attention_ref, all by the error-ratio rule."""
    out, lse = fa3nn.flash_attn_func(q, k, v, return_lse=True, backend=backend, **kwargs)
    out_ref, lse_ref = attention_ref(q, k, v, **kwargs)
    out_pt, lse_pt = attention_ref(q, k, v, upcast=False, reorder_ops=True, **kwargs)
    assert out.shape == q.shape[:-1] + (v.shape[-1],) and out.dtype == q.dtype
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
    assert_error_ratio(out, out_ref, out_pt, "out")
    assert_error_ratio(lse, lse_ref, lse_pt, "lse")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_ref = torch.autograd.grad(out_ref, (q, k, v), dout)
    grads_pt = torch.autograd.grad(out_pt, (q, k, v), dout)
    for name, g, g_ref, g_pt in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt):
        assert g.shape == g_ref.shape and g.dtype == q.dtype
        assert_error_ratio(g, g_ref, g_pt, name)


@pytest.mark.parametrize("softcap", [0.0, 15.0])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_features(dtype, seqlens, heads, mask, softcap):
    nheads, nheads_kv = HEADS[heads]
    causal, window_size = MASKS[mask]
    seqlen_q, seqlen_k = seqlens
    batch = 1 if seqlen_q * seqlen_k > 100_000 else 2
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, 32, dtype, requires_grad=True)
    check_against_ref(q, k, v, causal=causal, window_size=window_size, softcap=softcap)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seqlens", [(113, 203), (128, 128)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_headdims(dtype, headdim, seqlens, causal):
    q, k, v = random_qkv(2, *seqlens, 4, 2, headdim, dtype, requires_grad=True)
    check_against_ref(q, k, v, causal=causal)


def test_custom_scale_and_different_v_headdim():
    q, k, v = random_qkv(2, 37, 53, 4, 2, 64, torch.float16, headdim_v=32, requires_grad=True)
    check_against_ref(q, k, v, causal=True, softmax_scale=0.3)


def test_rows_without_keys_give_zeros_and_neg_inf_lse():
    # causal with seqlen_q > seqlen_k: bottom-right alignment leaves the first seqlen_q - seqlen_k rows empty.
    q, k, v = random_qkv(1, 9, 4, 2, 2, 16, torch.float32)
    out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out[:, :5], torch.zeros_like(out[:, :5]))
    assert torch.isneginf(lse[:, :, :5]).all()
    assert torch.isfinite(lse[:, :, 5:]).all() and out[:, 5:].abs().sum() > 0
    # Row 5 is aligned with key 0 only: its output is exactly v[0].
    torch.testing.assert_close(out[:, 5], v[:, 0], rtol=0, atol=0)


def test_bottom_right_alignment_matches_picture():
    """The picture in fa3nn.masks: seqlen_q = 3, seqlen_k = 5, causal -> rows attend keys 0..2, 0..3, 0..4."""
    q = torch.zeros(1, 3, 1, 8)  # equal scores: each row averages exactly the keys it may attend
    k = torch.zeros(1, 5, 1, 8)
    v = torch.arange(5, dtype=torch.float32).view(1, 5, 1, 1).expand(1, 5, 1, 8).contiguous()
    out = fa3nn.flash_attn_func(q, k, v, causal=True)
    assert out[0, :, 0, 0].tolist() == [1.0, 1.5, 2.0]  # means of 0..2, 0..3, 0..4


def test_nan_propagates_like_the_reference():
    q, k, v = random_qkv(1, 16, 24, 2, 2, 16, torch.float32)
    q[0, 3, 1, 5] = float("nan")
    out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, return_lse=True)
    out_ref, lse_ref = attention_ref(q, k, v, causal=True)
    assert out[0, 3, 1].isnan().all() and torch.isfinite(out[0, 3, 0]).all()
    assert_error_ratio(out, out_ref, out_ref, "out")
    assert_error_ratio(lse, lse_ref, lse_ref, "lse")


def test_chunked_queries_match_unchunked(monkeypatch):
    from fa3nn.backends import reference

    q, k, v = random_qkv(2, 130, 70, 6, 3, 32, torch.float32, requires_grad=True)
    out_full = fa3nn.flash_attn_func(q, k, v, causal=True, softcap=4.0)
    grads_full = torch.autograd.grad(out_full.sum(), (q, k, v))
    monkeypatch.setattr(reference, "SCORE_BUDGET", 2 * 6 * 70 * 7)  # 7 query rows per chunk
    assert reference._chunk_rows(2, 6, 130, 70) == 7
    out_chunked = fa3nn.flash_attn_func(q, k, v, causal=True, softcap=4.0)
    grads_chunked = torch.autograd.grad(out_chunked.sum(), (q, k, v))
    torch.testing.assert_close(out_chunked, out_full, rtol=1e-12, atol=1e-12)
    for g_chunked, g_full in zip(grads_chunked, grads_full):
        torch.testing.assert_close(g_chunked, g_full, rtol=1e-10, atol=1e-10)


def test_long_sequence_chunks_bound_memory():
    from fa3nn.backends import reference

    rows = reference._chunk_rows(batch=1, nheads=16, seqlen_q=8192, seqlen_k=8192)
    assert rows < 8192 and 1 * 16 * rows * 8192 <= reference.SCORE_BUDGET


def test_lse_gradient_flows():
    """d(sum lse)/dq through the op equals autograd through attention_ref (the dlse path of the backward)."""
    q, k, v = random_qkv(2, 19, 23, 4, 2, 16, torch.float64, requires_grad=True)
    _, lse = fa3nn.flash_attn_func(q, k, v, causal=True, return_lse=True)
    _, lse_ref = attention_ref(q, k, v, causal=True)
    weights = torch.randn_like(lse)
    grads = torch.autograd.grad((lse * weights).sum(), (q, k, v))
    grads_ref = torch.autograd.grad((lse_ref * weights).sum(), (q, k, v), allow_unused=True)
    for g, g_ref in zip(grads, grads_ref):
        g_ref = torch.zeros_like(g) if g_ref is None else g_ref
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)
