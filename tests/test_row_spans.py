"""Packed rows outside every sequence (fa3nn.spans): cu_seqlens that start after row 0 or end before the last row, as
FlashAttention-3 takes them (a buffer padded to a fixed token count). The call must give the covered rows exactly
what the same call on those rows alone gives (the same backend, bitwise where it is deterministic), zeros in out and
the gradients elsewhere and -inf in lse, whatever dout holds on the uncovered rows."""

from __future__ import annotations

import pytest
import torch

import fa3nn
from fa3nn.fp8.inputs import E4M3

# (cu_seqlens_q, total_q rows, cu_seqlens_k, total_k rows): leading and / or trailing rows left out on either side
SPANS = {
    "both_sides": ((2, 7, 13), 16, (3, 9, 20), 23),
    "q_trailing": ((0, 5, 11), 14, (0, 7, 19), 19),
    "k_leading": ((0, 6, 10), 10, (4, 9, 21), 21),
    "empty_cover": ((3, 3, 3), 6, (1, 1, 1), 4),
}
FEATURES = {
    "plain": {},
    "causal": {"causal": True},
    "window_softcap": {"window_size": (3, 1), "softcap": 5.0},
    "causal_sinks": {"causal": True, "sinks": True},
}


def _tensors(span, nheads=4, nheads_kv=2, d=16, dv=16, dtype=torch.float32, device="cpu"):
    cu_q, total_q, cu_k, total_k = span
    q = torch.randn(total_q, nheads, d, dtype=dtype, device=device)
    k = torch.randn(total_k, nheads_kv, d, dtype=dtype, device=device)
    v = torch.randn(total_k, nheads_kv, dv, dtype=dtype, device=device)
    cu = [torch.tensor(c, dtype=torch.int32, device=device) for c in (cu_q, cu_k)]
    return q, k, v, *cu


def _longest(cu: torch.Tensor) -> int:
    return int(cu.diff().max())


def check_span(span, backend="auto", dtype=torch.float32, device="cpu", headdim=16, **kwargs):
    """The call on the whole packed tensors against the same call on the covered rows alone."""
    q, k, v, cu_q, cu_k = _tensors(span, d=headdim, dv=headdim, dtype=dtype, device=device)
    if kwargs.pop("sinks", False):
        kwargs["sinks"] = torch.randn(q.shape[1], device=device, requires_grad=True)
    (q0, q1), (k0, k1) = (int(cu_q[0]), int(cu_q[-1])), (int(cu_k[0]), int(cu_k[-1]))
    whole = [t.clone().requires_grad_() for t in (q, k, v)]
    alone = [t[rows].clone().requires_grad_() for t, rows in zip((q, k, v), (slice(q0, q1), *[slice(k0, k1)] * 2))]
    maxes = (_longest(cu_q), _longest(cu_k))
    out, lse = fa3nn.flash_attn_varlen_func(*whole, cu_q, cu_k, *maxes, return_lse=True, backend=backend, **kwargs)
    out_a, lse_a = fa3nn.flash_attn_varlen_func(*alone, cu_q - q0, cu_k - k0, *maxes, return_lse=True,
                                                backend=backend, **kwargs)
    assert out.shape == q.shape and lse.shape == (q.shape[1], q.shape[0])
    assert torch.equal(out[q0:q1], out_a) and torch.equal(lse[:, q0:q1], lse_a)
    outside = torch.ones(q.shape[0], dtype=torch.bool, device=device)
    outside[q0:q1] = False
    assert torch.equal(out[outside], torch.zeros_like(out[outside]))
    assert torch.isneginf(lse[:, outside]).all()

    dout = torch.randn_like(out)  # nonzero on the uncovered rows too: they must not reach any gradient
    dlse = torch.randn_like(lse_a)
    extra = [kwargs["sinks"]] if "sinks" in kwargs else []
    grads = torch.autograd.grad((out * dout).sum() + (lse[:, q0:q1] * dlse).sum(), whole + extra)
    grads_a = torch.autograd.grad((out_a * dout[q0:q1]).sum() + (lse_a * dlse).sum(), alone + extra)
    for name, g, g_a, (first, end) in zip(("dq", "dk", "dv"), grads, grads_a, ((q0, q1), (k0, k1), (k0, k1))):
        assert g.shape == whole[0 if name == "dq" else 1].shape, name
        torch.testing.assert_close(g[first:end], g_a, msg=name)
        assert g[:first].abs().sum() == 0 and g[end:].abs().sum() == 0, name
    if extra:
        torch.testing.assert_close(grads[3], grads_a[3], msg="dsinks")
    return out


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("span", list(SPANS))
def test_rows_outside_every_sequence(span, feature):
    out = check_span(SPANS[span], **FEATURES[feature])
    if span != "empty_cover":
        assert out.abs().sum() > 0


def test_span_matches_float64_oracle():
    """Against a float64 softmax over each sequence's rows, written out here (not fa3nn's reference)."""
    q, k, v, cu_q, cu_k = _tensors(SPANS["both_sides"], dtype=torch.float64)
    out = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, causal=True)
    expected = torch.zeros_like(out)
    for (a, b), (c, d) in zip(zip(cu_q.tolist(), cu_q.tolist()[1:]), zip(cu_k.tolist(), cu_k.tolist()[1:])):
        keys, values = (t[c:d].repeat_interleave(2, dim=1) for t in (k, v))
        scores = torch.einsum("qhd,khd->hqk", q[a:b], keys) * 16**-0.5
        allowed = torch.arange(b - a)[:, None] + (d - c) - (b - a) >= torch.arange(d - c)[None, :]
        probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        expected[a:b] = torch.einsum("hqk,khd->qhd", probs, values)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_boundaries_are_read_once_per_tensor(monkeypatch):
    """A device tensor's cu_seqlens are read on the host once (fa3nn.memo), whichever rule a caller checks them by:
    kvcache's strict one and the ops' within=True one kept overwriting each other's memo entry (two reads per call;
    the s58 review). remember_cpu=True stands in for a GPU tensor."""
    from fa3nn import checks

    reads, lookup = [], checks._validated._lookup
    monkeypatch.setattr(checks._validated, "remember_cpu", True)
    monkeypatch.setattr(checks._validated, "_lookup",
                        lambda tensor, key, compute: lookup(tensor, key, lambda: reads.append(key) or compute()))
    q, k, v, cu_q, cu_k = _tensors(SPANS["both_sides"])
    q.requires_grad_()
    for _ in range(3):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, causal=True).sum().backward()
    assert len(reads) == 2  # cu_q and cu_k, once each
    reads.clear()
    cu = torch.tensor([0, 1, 3], dtype=torch.int32)
    cache = torch.randn(2, 8, 2, 16)
    for call in range(3):  # (its packed call's boundary tensors are new the first time, kept by value after it)
        fa3nn.flash_attn_with_kvcache(torch.randn(3, 4, 16), cache, cache, cache_seqlens=4, cu_seqlens_q=cu,
                                      max_seqlen_q=2, causal=True)
        if call == 0:
            first = len(reads)
    assert first > 0 and len(reads) == first


@pytest.mark.parametrize("rotary", [False, True])
def test_kvcache_packed_queries_outside_every_sequence(rotary):
    """flash_attn_with_kvcache's packed q takes cu_seqlens_q covering part of its rows too: the covered rows get the
    call on those rows alone (the cache written the same), the rest zeros; rotary leaves them at position 0 (they
    indexed past the per-sequence positions)."""
    q = torch.randn(9, 4, 16)
    caches = [torch.randn(2, 10, 2, 16) for _ in range(2)]
    k, v = torch.randn(2, 3, 2, 16), torch.randn(2, 3, 2, 16)
    extra = dict(rotary_cos=torch.rand(12, 8), rotary_sin=torch.rand(12, 8)) if rotary else {}
    cu = torch.tensor([2, 4, 7], dtype=torch.int32)
    whole, alone = [c.clone() for c in caches], [c.clone() for c in caches]
    out, lse = fa3nn.flash_attn_with_kvcache(q, *whole, k, v, cache_seqlens=4, cu_seqlens_q=cu, max_seqlen_q=3,
                                             causal=True, return_softmax_lse=True, **extra)
    out_a, lse_a = fa3nn.flash_attn_with_kvcache(q[2:7], *alone, k, v, cache_seqlens=4, cu_seqlens_q=cu - 2,
                                                 max_seqlen_q=3, causal=True, return_softmax_lse=True, **extra)
    assert torch.equal(out[2:7], out_a) and torch.equal(lse[:, 2:7], lse_a)
    assert out[:2].abs().sum() == 0 and out[7:].abs().sum() == 0 and torch.isneginf(lse[:, [0, 1, 7, 8]]).all()
    assert all(torch.equal(a, b) for a, b in zip(whole, alone))


def test_span_with_seqused_and_chunks():
    """seqused and attention_chunk read the boundaries on the host and pack a call of their own: that call keeps the
    caller's uncovered rows out as well."""
    q, k, v, cu_q, cu_k = _tensors(SPANS["both_sides"])
    used_q, used_k = torch.tensor([3, 4], dtype=torch.int32), torch.tensor([6, 2], dtype=torch.int32)
    out, lse = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, used_q, used_k, causal=True, return_lse=True)
    for i, (a, c) in enumerate(((2, 3), (7, 9))):
        n, m = int(used_q[i]), int(used_k[i])
        alone = fa3nn.flash_attn_varlen_func(q[a:a + n], k[c:c + m], v[c:c + m], *(
            torch.tensor([0, x], dtype=torch.int32) for x in (n, m)), n, m, causal=True)
        torch.testing.assert_close(out[a:a + n], alone, rtol=0, atol=0)
    used_rows = torch.zeros(q.shape[0], dtype=torch.bool)
    used_rows[2:5] = used_rows[7:11] = True
    assert out[~used_rows].abs().sum() == 0 and torch.isneginf(lse[:, ~used_rows]).all()
    chunked = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, causal=True, attention_chunk=4)
    shifted = fa3nn.flash_attn_varlen_func(q[2:13], k[3:20], v[3:20], cu_q - 2, cu_k - 3, 6, 11, causal=True,
                                           attention_chunk=4)
    torch.testing.assert_close(chunked[2:13], shifted, rtol=0, atol=0)
    assert chunked[:2].abs().sum() == 0 and chunked[13:].abs().sum() == 0


def test_span_with_fp8_inputs_and_recipes():
    """FlashAttention-3's FP8 call (e4m3 inputs, descales per sequence) takes the span; an fp8 recipe, whose scales
    and saved e4m3 Q / K are laid out by the sequences' rows, refuses it by name."""
    q, k, v, cu_q, cu_k = _tensors(SPANS["both_sides"])
    q8, k8, v8 = (t.clamp(-4, 4).to(E4M3) for t in (q, k, v))
    descales = [torch.rand(2, 2) + 0.5 for _ in range(3)]
    out = fa3nn.flash_attn_varlen_func(q8, k8, v8, cu_q, cu_k, 6, 11, q_descale=descales[0], k_descale=descales[1],
                                       v_descale=descales[2], causal=True)
    alone = fa3nn.flash_attn_varlen_func(q8[2:13], k8[3:20], v8[3:20], cu_q - 2, cu_k - 3, 6, 11,
                                         q_descale=descales[0], k_descale=descales[1], v_descale=descales[2],
                                         causal=True)
    assert torch.equal(out[2:13], alone) and out[:2].abs().sum() == 0 and out[13:].abs().sum() == 0
    with pytest.raises(ValueError, match=r"an fp8 recipe needs cu_seqlens covering every packed row .*"
                                         r"cu_seqlens_q\[0\] = 2, cu_seqlens_q\[-1\] = 13 of 16 rows; "
                                         r"cu_seqlens_k\[0\] = 3, cu_seqlens_k\[-1\] = 20 of 23 rows"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, fp8="per_tile")


def test_span_under_compile_fullgraph():
    """The span is found inside the op (its cu_seqlens check), so a compiled call keeps one graph."""
    torch._dynamo.reset()
    q, k, v, cu_q, cu_k = _tensors(SPANS["both_sides"])

    def f(q, k, v):
        return fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 11, causal=True)

    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v), f(q, k, v))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["auto", "triton"])  # auto: the native kernels on an H100 / H200
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("span", list(SPANS))
def test_rows_outside_every_sequence_gpu(span, feature, backend):
    check_span(SPANS[span], backend=backend, dtype=torch.bfloat16, device="cuda", headdim=128, deterministic=True,
               **FEATURES[feature])
