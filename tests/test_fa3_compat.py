"""FlashAttention-3's calling conventions (fa3nn.fa3_compat, fa3nn.slots, fa3nn.fp8.inputs): its parameter order,
return_attn_probs, the scheduling hints, qv, seqused / dense slots, flash_attn_qkvpacked_func and FP8 inputs with
descales, each against an independent oracle."""

import inspect
import warnings

import numpy as np
import pytest
import torch

import fa3nn
from fa3nn import fa3_compat, slots
from fa3nn.fp8 import CurrentScaling, quantize_qkv_tensors
from fa3nn.testing import assert_error_ratio, attention_ref, random_qkv, unpad

# FlashAttention-3's parameters in order (hopper/flash_attn_interface.py, 2025): the contract for positional calls.
FA3_FUNC = ["q", "k", "v", "softmax_scale", "causal", "qv", "q_descale", "k_descale", "v_descale", "window_size",
            "attention_chunk", "softcap", "num_splits", "pack_gqa", "deterministic", "sm_margin", "return_attn_probs"]
FA3_VARLEN = FA3_FUNC[:3] + ["cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "seqused_q",
                             "seqused_k"] + FA3_FUNC[3:]
FA3_QKVPACKED = ["qkv", "softmax_scale", "causal", "q_descale", "k_descale", "v_descale", "window_size",
                 "attention_chunk", "softcap", "deterministic", "num_heads_q", "sm_margin", "return_attn_probs"]


def _positional(fn):
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize("fn,expected", [(fa3nn.flash_attn_func, FA3_FUNC), (fa3nn.flash_attn_varlen_func, FA3_VARLEN),
                                         (fa3nn.flash_attn_qkvpacked_func, FA3_QKVPACKED)], ids=lambda x: "")
def test_parameter_order_is_fa3s(fn, expected):
    assert _positional(fn) == expected
    keyword_only = [p.name for p in inspect.signature(fn).parameters.values() if p.kind == p.KEYWORD_ONLY]
    assert keyword_only == ["return_lse", "sinks", "fp8", "backend"]


def test_positional_call_as_fa3_and_return_attn_probs():
    q, k, v = random_qkv(2, 9, 11, 4, 2, 16, torch.float64)
    window = (3, 2)
    # FlashAttention-3 positions: softmax_scale, causal, qv, three descales, window_size, attention_chunk, softcap
    out, lse = fa3nn.flash_attn_func(q, k, v, 0.3, False, None, None, None, None, window, 0, 2.0, 1, None, False, 0,
                                     True)
    out_ref, lse_ref = attention_ref(q, k, v, window_size=window, softcap=2.0, softmax_scale=0.3)
    torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, lse_ref, rtol=1e-12, atol=1e-12)
    out_lse, lse_lse = fa3nn.flash_attn_func(q, k, v, 0.3, window_size=window, softcap=2.0, return_lse=True)
    assert torch.equal(out_lse, out) and torch.equal(lse_lse, lse)
    assert isinstance(fa3nn.flash_attn_func(q, k, v), torch.Tensor)


def test_hints_change_nothing():
    q, k, v = random_qkv(2, 33, 40, 4, 2, 16, torch.float32)
    base = fa3nn.flash_attn_func(q, k, v, causal=True)
    for hints in (dict(num_splits=0), dict(num_splits=3), dict(pack_gqa=True), dict(pack_gqa=False)):
        assert torch.equal(fa3nn.flash_attn_func(q, k, v, causal=True, **hints), base), hints
    fa3_compat._warned_sm_margin.discard("reference")
    with pytest.warns(UserWarning, match=r"sm_margin=8 is not honoured by the reference backend"):
        assert torch.equal(fa3nn.flash_attn_func(q, k, v, causal=True, sm_margin=8), base)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        fa3nn.flash_attn_func(q, k, v, causal=True, sm_margin=8)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(num_splits=1.0), TypeError, r"num_splits must be an int"),
    (dict(num_splits=True), TypeError, r"num_splits must be an int"),
    (dict(pack_gqa="yes"), TypeError, r"pack_gqa must be a bool"),
    (dict(sm_margin=-1), ValueError, r"sm_margin must be >= 0"),
    (dict(attention_chunk=-1), ValueError, r"attention_chunk must be >= 0"),
    (dict(attention_chunk=2.0), TypeError, r"attention_chunk must be an int"),
    (dict(attention_chunk=2**31), ValueError, r"attention_chunk must be at most 2147483647"),
    (dict(return_attn_probs="no"), TypeError, r"return_attn_probs must be a bool"),
    (dict(qv=torch.zeros(2, 5, 4, 8)), ValueError, r"qv must have q's shape with v's headdim \(2, 5, 4, 16\)"),
    (dict(qv=[1.0]), TypeError, r"qv must be a torch.Tensor"),
    (dict(q_descale=torch.ones(2, 2)), TypeError, r"q, k and v must all be torch.float8_e4m3fn"),
], ids=lambda x: "")
def test_fa3_arguments_refused_clearly(kwargs, error, match):
    q, k, v = random_qkv(2, 5, 6, 4, 2, 16, torch.float32)
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_func(q, k, v, **kwargs)


def test_window_size_takes_numpy_integers():
    """FlashAttention-3 hands window_size[0] / [1] to its op as ints, which takes a numpy integer (a window read from
    a numpy array of per-layer windows), as fa3nn's max_seqlen and num_heads_q do: window_size refused them
    ("must be a pair of ints"). Floats and bools stay refused."""
    q, k, v = random_qkv(2, 9, 11, 4, 2, 16, torch.float64)
    want = fa3nn.flash_attn_func(q, k, v, window_size=(3, 1))
    for window in ((np.int64(3), np.int32(1)), [np.int64(3), 1]):
        torch.testing.assert_close(fa3nn.flash_attn_func(q, k, v, window_size=window), want, rtol=0, atol=0)
        torch.testing.assert_close(fa3nn.FlashAttentionV3(window_size=window)(q, k, v), want, rtol=0, atol=0)
    for bad in ((3.0, 1), (np.float32(3), 1), (True, 1), (np.True_, 1)):
        with pytest.raises(TypeError, match=r"window_size must be a pair of ints"):
            fa3nn.flash_attn_func(q, k, v, window_size=bad)
    with pytest.raises(ValueError, match=r"window_size entries must be >= -1"):
        fa3nn.flash_attn_func(q, k, v, window_size=(np.int64(-2), 0))


# FlashAttention-3's scalar arguments as numpy scalars or 0-d CPU tensors, and the Python number each stands for:
# its op takes both through torch's schema (an `int` argument takes np.int64 and a 0-d integer tensor, a `float` one
# np.float32 / np.float64 / np.int64 and a 0-d tensor), e.g. a value read from a numpy array of per-layer settings.
NUMPY_SCALARS = [
    ("num_splits", np.int64(2), 2), ("num_splits", torch.tensor(2), 2), ("sm_margin", np.int64(0), 0),
    ("sm_margin", np.uint8(0), 0), ("attention_chunk", np.int64(3), 3), ("attention_chunk", torch.tensor(3), 3),
    ("softcap", np.float32(5.0), 5.0), ("softcap", np.float64(5.0), 5.0), ("softcap", np.int64(5), 5),
    ("softcap", torch.tensor(5.0), 5.0), ("softmax_scale", np.float32(0.25), 0.25),
    ("softmax_scale", np.int32(1), 1), ("softmax_scale", torch.tensor(0.25, dtype=torch.float64), 0.25),
    ("window_size", (np.int64(3), np.int32(1)), (3, 1)), ("window_size", (torch.tensor(3), 1), (3, 1)),
]


def _each_public_function(name, value):
    """(label, call) for every public function taking `name`, each called with name=value and the other options
    fixed. flash_attn_with_kvcache takes attention_chunk 0 only (as FlashAttention-3's), so it gets value * 0."""
    q, k, v = random_qkv(2, 9, 11, 4, 2, 16, torch.float64, generator=torch.Generator().manual_seed(7))
    cu_q, cu_k = torch.tensor([0, 9, 18], dtype=torch.int32), torch.tensor([0, 11, 22], dtype=torch.int32)
    kw = {**(dict(causal=True) if name == "softcap" else dict(causal=True, softcap=2.0)), name: value}
    cache_kw = {**kw, name: value * 0} if name == "attention_chunk" else kw
    calls = [
        ("flash_attn_func", lambda: fa3nn.flash_attn_func(q, k, v, **kw)),
        ("flash_attn_varlen_func", lambda: fa3nn.flash_attn_varlen_func(
            q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q, cu_k, 9, 11, **kw)),
        ("flash_attn_with_kvcache", lambda: fa3nn.flash_attn_with_kvcache(
            q, k.clone(), v.clone(), k[:, :2], v[:, :2], cache_seqlens=5, **cache_kw)),
    ]
    if name not in ("num_splits", "sm_margin"):  # (FlashAttentionV3 takes neither)
        calls.append(("FlashAttentionV3", lambda: fa3nn.FlashAttentionV3(**kw)(q, k, v)))
    if name != "num_splits":  # (FlashAttention-3's flash_attn_qkvpacked_func takes none)
        qkv = torch.stack([q, q.flip(1), q.roll(1, dims=1)], dim=2)
        calls.append(("flash_attn_qkvpacked_func", lambda: fa3nn.flash_attn_qkvpacked_func(qkv, **kw)))
    if name in ("softmax_scale", "softcap", "window_size"):
        calls.append(("explain", lambda: fa3nn.explain(q, k, v, **kw).forward))
    if name in ("num_splits", "sm_margin"):
        calls.append(("get_scheduler_metadata", lambda: fa3nn.get_scheduler_metadata(2, 9, 11, 4, 2, 16, 5,
                                                                                       **{name: value})))
    return calls


@pytest.mark.parametrize("name,value,number", NUMPY_SCALARS, ids=lambda x: "")
def test_numpy_scalars_and_0d_tensors_are_the_numbers_they_hold(name, value, number):
    """Every public function takes FlashAttention-3's scalar arguments as numpy scalars and 0-d CPU tensors, with the
    result of the Python number, bit for bit: num_splits / sm_margin / attention_chunk as np.int64 and softcap as
    np.float32 were refused ('num_splits must be an int ... got numpy.int64'), as were softmax_scale as np.float32
    and any of them as a 0-d tensor (np.float64 passed, being a float)."""
    for (label, call), (_, want) in zip(_each_public_function(name, value), _each_public_function(name, number)):
        got, expected = call(), want()
        if isinstance(got, torch.Tensor):
            assert torch.equal(got, expected), label
        else:
            assert got == expected, label


def test_flash_attention_v3_layer_idx_may_be_a_numpy_integer():
    """FlashAttentionV3's own int argument follows the same rule (a layer index from np.arange): np.int64(3) is the
    int 3, np.float32(3) and True are refused by name."""
    layer = fa3nn.FlashAttentionV3(layer_idx=np.int64(3))
    assert layer.layer_idx == 3 and type(layer.layer_idx) is int
    for bad in (np.float32(3), True):
        with pytest.raises(TypeError, match=r"layer_idx must be an int >= 0"):
            fa3nn.FlashAttentionV3(layer_idx=bad)


@pytest.mark.parametrize("name,bad,error,match", [
    ("num_splits", np.float32(2.0), TypeError, r"num_splits must be an int .*got numpy.float32"),
    ("num_splits", np.True_, TypeError, r"num_splits must be an int .*got numpy.bool"),
    ("sm_margin", torch.tensor(True), TypeError, r"sm_margin must be an int .*torch.bool"),
    ("sm_margin", np.int64(-1), ValueError, r"sm_margin must be >= 0 \(SMs to leave free\), got -1"),
    ("attention_chunk", torch.tensor(2.0), TypeError, r"attention_chunk must be an int .*torch.float32"),
    ("attention_chunk", torch.tensor([2]), TypeError, r"attention_chunk must be an int .*shape \(1,\)"),
    ("attention_chunk", torch.tensor(2, device="meta"), TypeError, r"attention_chunk must be an int .*device meta"),
    ("attention_chunk", np.int64(2**31), ValueError, r"attention_chunk must be at most 2147483647"),
    ("softcap", np.True_, TypeError, r"softcap must be a finite float"),
    ("softcap", np.float32("nan"), TypeError, r"softcap must be a finite float, got nan"),
    ("softcap", np.float32(-1.0), ValueError, r"softcap must be >= 0 \(0 disables it\), got -1.0"),
    ("softcap", torch.tensor(True), TypeError, r"softcap must be a finite float"),
    ("softmax_scale", np.True_, TypeError, r"softmax_scale must be a float or None"),
    ("softmax_scale", np.float32("inf"), ValueError, r"softmax_scale must be finite, got inf"),
    ("softmax_scale", torch.tensor([0.5]), TypeError, r"softmax_scale must be a float or None"),
    ("window_size", (np.float32(3), 1), TypeError, r"window_size must be a pair of ints"),
    ("window_size", (torch.tensor(3.0), 1), TypeError, r"window_size must be a pair of ints"),
    ("window_size", (np.int64(-2), 1), ValueError, r"window_size entries must be >= -1"),
], ids=lambda x: "")
def test_numpy_scalars_of_the_wrong_kind_are_refused_by_name(name, bad, error, match):
    """A bool, a non-integer where an int is required (torch's schema takes True as 1 and truncates np.float32(2.5)
    to 2: fa3nn refuses both), a tensor that is not a 0-d CPU number, or a bad value is refused by every public
    function, naming the argument."""
    for label, call in _each_public_function(name, bad):
        if label == "flash_attn_with_kvcache" and name == "attention_chunk" and error is ValueError:
            continue  # (bad * 0 is a good 0 there)
        with pytest.raises(error, match=match):
            call()


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_qv_is_an_extra_score_term(varlen):
    """scores = (q·kᵀ + qv·vᵀ) * (d + dv) ** -0.5, the output P·V: against that formula written out in float64."""
    batch, seqlen_q, seqlen_k, nheads, nheads_kv, d, dv = 2, 7, 9, 4, 2, 8, 12
    q, k, _ = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, d, torch.float64, requires_grad=True)
    v = torch.randn(batch, seqlen_k, nheads_kv, dv, dtype=torch.float64, requires_grad=True)
    qv = torch.randn(batch, seqlen_q, nheads, dv, dtype=torch.float64, requires_grad=True)
    if varlen:
        cu_q = torch.arange(batch + 1, dtype=torch.int32) * seqlen_q
        cu_k = torch.arange(batch + 1, dtype=torch.int32) * seqlen_k
        flat = [t.reshape(-1, *t.shape[2:]) for t in (q, k, v, qv)]
        out = fa3nn.flash_attn_varlen_func(*flat[:3], cu_q, cu_k, seqlen_q, seqlen_k, causal=True, qv=flat[3])
        out = out.view(batch, seqlen_q, nheads, dv)
    else:
        out = fa3nn.flash_attn_func(q, k, v, causal=True, qv=qv)
    group = nheads // nheads_kv
    k_rep, v_rep = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    scores = (torch.einsum("bthd,bshd->bhts", q, k_rep) + torch.einsum("bthd,bshd->bhts", qv, v_rep)) * (d + dv) ** -0.5
    causal = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool).tril(seqlen_k - seqlen_q)
    expected = torch.einsum("bhts,bshd->bthd", scores.masked_fill(~causal, float("-inf")).softmax(-1), v_rep)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    dout = torch.randn_like(out)
    for g, g_ref in zip(torch.autograd.grad(out, (q, k, v, qv), dout), torch.autograd.grad(expected, (q, k, v, qv),
                                                                                          dout)):
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def _chunked_attention(q, k, v, chunk, causal, window_size, scale=None):
    """FlashAttention-3's chunk mask (hopper/mask.h) written out densely: query i at key position
    i' = i + seqlen_k - seqlen_q sees key j when floor(j / chunk) == floor(i' / chunk) and the window allows it."""
    seqlen_q, seqlen_k, group = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    i = torch.arange(seqlen_q, device=q.device).view(-1, 1) + seqlen_k - seqlen_q
    j = torch.arange(seqlen_k, device=q.device).view(1, -1)
    left, right = (window_size[0], 0) if causal else window_size
    allowed = torch.div(j, chunk, rounding_mode="floor") == torch.div(i, chunk, rounding_mode="floor")
    if left >= 0:
        allowed &= j >= i - left
    if right >= 0:
        allowed &= j <= i + right
    scores = torch.einsum("bthd,bshd->bhts", q, k) * (q.shape[-1] ** -0.5 if scale is None else scale)
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)  # rows with no key: zeros
    return torch.einsum("bhts,bshd->bthd", probs, v)


@pytest.mark.parametrize("seqlens", [(37, 37), (20, 45), (45, 20)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("chunk", [1, 8, 13, 64])
@pytest.mark.parametrize("causal,window_size", [(True, (-1, -1)), (False, (-1, -1)), (True, (5, -1)),
                                                (False, (3, 4))])
def test_attention_chunk_matches_the_chunk_mask(seqlens, chunk, causal, window_size):
    """Forward and backward (FlashAttention-3 has the forward only) against the mask written out, float64."""
    q, k, v = random_qkv(2, *seqlens, 4, 2, 8, torch.float64, requires_grad=True)
    out = fa3nn.flash_attn_func(q, k, v, causal=causal, window_size=window_size, attention_chunk=chunk)
    expected = _chunked_attention(q, k, v, chunk, causal, window_size)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    dout = torch.randn_like(out)
    for g, g_ref in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(expected, (q, k, v), dout)):
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def test_attention_chunk_varlen_and_seqused():
    """Packed sequences and slots with seqused are chunked per sequence, each on its own (used) lengths."""
    lengths_q, lengths_k, chunk = [17, 0, 9, 30], [25, 6, 0, 30], 8
    q, k, v = (torch.randn(sum(n), h, 8, dtype=torch.float64) for n, h in ((lengths_q, 4), (lengths_k, 2),
                                                                          (lengths_k, 2)))
    cu_q, cu_k = (torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32)
                  for n in (lengths_q, lengths_k))
    out, lse = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 30, 30, causal=True, attention_chunk=chunk,
                                            return_attn_probs=True)
    for i in range(4):
        rows_q, rows_k = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        if lengths_q[i] == 0:
            continue
        expected = _chunked_attention(q[None, rows_q], k[None, rows_k], v[None, rows_k], chunk, True, (-1, -1))
        torch.testing.assert_close(out[rows_q], expected[0], rtol=1e-10, atol=1e-10)
    slots_q, slots_k = (torch.zeros(4, 30, h, 8, dtype=torch.float64) for h in (4, 2))
    slots_v = torch.zeros_like(slots_k)
    for i in range(4):
        slots_q[i, :lengths_q[i]] = q[cu_q[i]:cu_q[i + 1]]
        slots_k[i, :lengths_k[i]] = k[cu_k[i]:cu_k[i + 1]]
        slots_v[i, :lengths_k[i]] = v[cu_k[i]:cu_k[i + 1]]
    used_q, used_k = (torch.tensor(n, dtype=torch.int32) for n in (lengths_q, lengths_k))
    out_slots = fa3nn.flash_attn_varlen_func(slots_q, slots_k, slots_v, None, None, None, None, used_q, used_k,
                                             causal=True, attention_chunk=chunk)
    mask_q = _slot_masks(used_q, 30)
    torch.testing.assert_close(out_slots[mask_q], out, rtol=1e-12, atol=1e-12)
    assert torch.equal(out_slots[~mask_q], torch.zeros_like(out_slots[~mask_q]))


@pytest.mark.parametrize("fp8", [None, "per_tile"])
def test_module_attention_chunk_is_the_functions(fp8):
    """FlashAttentionV3(attention_chunk=...) (the one path, fa3nn.interface.attention) equals flash_attn_func's chunks,
    dense and packed, FP8 recipes included; gradients flow."""
    q, k, v = random_qkv(2, 20, 20, 4, 2, 32, torch.float32 if fp8 is None else torch.bfloat16)
    layer = fa3nn.FlashAttentionV3(causal=True, attention_chunk=8, fp8=fp8)
    assert "attention_chunk=8" in repr(layer)
    leaf = q.clone().requires_grad_()
    out = layer(leaf, k, v)
    assert torch.equal(out, fa3nn.flash_attn_func(q, k, v, causal=True, attention_chunk=8, fp8=fp8))
    cu = torch.tensor([0, 20, 40], dtype=torch.int32)
    packed = layer(*(t.reshape(40, *t.shape[2:]) for t in (q, k, v)), cu, cu, 20, 20)
    assert torch.equal(packed, out.reshape(40, 4, 32))
    out.float().sum().backward()
    assert leaf.grad is not None and torch.isfinite(leaf.grad).all()
    with pytest.raises(ValueError, match=r"attention_chunk must be >= 0"):
        fa3nn.FlashAttentionV3(attention_chunk=-2)
    with pytest.raises(TypeError, match=r"must be a floating tensor \(torch.float16, torch.bfloat16, torch.float32, "
                                        r"torch.float64\), got torch.int64$"):  # the same checks as without chunks
        layer(q.long(), k, v)
    with pytest.raises(ValueError, match=r"cu_seqlens_q and cu_seqlens_k must both have batch \+ 1 entries|k must "
                                         r"have 3 dimensions"):
        fa3nn.interface.attention(q.reshape(40, 4, 32), k, v, cu, None, 20, None, attention_chunk=8)


def test_attention_chunk_boundaries():
    """The chunks of one sequence: keys [cC, (c + 1)C), queries by their key position, both clipped."""
    from fa3nn.chunks import chunk_boundaries

    # seqlen_q 5, seqlen_k 11, chunk 4: queries sit at key positions 6..10 -> chunks 1 (6, 7) and 2 (8, 9, 10)
    assert chunk_boundaries((0, 5), (0, 11), 4) == ((0, 0, 2, 5), (0, 4, 8, 11), (3,))
    # seqlen_q 6, seqlen_k 3, chunk 2: key positions -3..2 -> before key 0 (-3, -2, -1): one sequence of no keys;
    # chunk 0 (0, 1); chunk 1 (2)
    assert chunk_boundaries((0, 6), (0, 3), 2) == ((0, 3, 5, 6), (0, 0, 2, 3), (3,))
    assert chunk_boundaries((0, 100000), (0, 1), 1)[2] == (2,)  # not one sequence per empty chunk
    assert chunk_boundaries((0, 0, 4), (0, 5, 5), 2) == ((0, 0, 4), (0, 5, 5), (1, 1))  # no queries / no keys: one


def _attention_with_sinks(q, k, v, sinks, causal):
    """gpt-oss's eager attention written out: a sink logit per head joins the softmax and is dropped after it."""
    seqlen_q, seqlen_k, group = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    scores = torch.einsum("bthd,bshd->bhts", q, k) * q.shape[-1] ** -0.5
    if causal:
        allowed = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=q.device).tril(seqlen_k - seqlen_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
    logits = torch.cat([scores, sinks.view(1, -1, 1, 1).expand(*scores.shape[:3], 1)], dim=-1)
    probs = logits.softmax(-1)[..., :-1]
    return torch.einsum("bhts,bshd->bthd", probs, v), torch.logsumexp(logits, -1)


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("seqlens", [(9, 13), (13, 9)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_sinks_match_gpt_oss_attention(varlen, seqlens):
    """Output, lse and the gradients of q, k, v and the sinks, float64; with seqlen_q > seqlen_k causal rows that
    attend no key keep out 0 and get lse = the sink."""
    q, k, v = random_qkv(2, *seqlens, 4, 2, 16, torch.float64, requires_grad=True)
    sinks = torch.randn(4, dtype=torch.float64, requires_grad=True)
    if varlen:
        cu_q, cu_k = (torch.arange(3, dtype=torch.int32) * s for s in seqlens)
        flat = [t.reshape(-1, *t.shape[2:]) for t in (q, k, v)]
        out, lse = fa3nn.flash_attn_varlen_func(*flat, cu_q, cu_k, *seqlens, causal=True, sinks=sinks,
                                                return_attn_probs=True)
        out, lse = out.view(2, seqlens[0], 4, 16), lse.view(4, 2, seqlens[0]).transpose(0, 1)
    else:
        out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, sinks=sinks, return_attn_probs=True)
    expected, expected_lse = _attention_with_sinks(q, k, v, sinks, causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(lse, expected_lse, rtol=1e-10, atol=1e-10)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    grads = torch.autograd.grad((out * dout).sum() + (lse * dlse).sum(), (q, k, v, sinks))
    expected_grads = torch.autograd.grad((expected * dout).sum() + (expected_lse * dlse).sum(), (q, k, v, sinks))
    for g, g_ref in zip(grads, expected_grads):
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9)


def test_module_sinks_are_the_functions():
    q, k, v = random_qkv(2, 7, 7, 4, 2, 16, torch.float64)
    sinks = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    out = fa3nn.FlashAttentionV3(causal=True)(q, k, v, sinks=sinks)
    assert torch.equal(out, fa3nn.flash_attn_func(q, k, v, causal=True, sinks=sinks))
    out.sum().backward()
    assert sinks.grad is not None and sinks.grad.abs().sum() > 0


def test_sinks_save_no_copy_of_out_and_stay_finite():
    """The correction saves the attention's own out (no float32 copy per layer), and a -inf sink on rows that attend
    no key (seqlen_q > seqlen_k, causal) gives zeros, lse -inf and finite gradients, not NaN."""
    q, k, v = random_qkv(1, 12, 5, 2, 2, 16, torch.bfloat16, requires_grad=True)
    sinks = torch.tensor([float("-inf"), 0.5], requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append((x.dtype, x.numel())) or x, lambda x: x):
        out, lse = fa3nn.flash_attn_func(q, k, v, causal=True, sinks=sinks, return_attn_probs=True)
    assert (torch.float32, out.numel()) not in saved
    assert torch.equal(out[0, :7], torch.zeros_like(out[0, :7]))  # rows 0..6 see no key
    assert torch.isneginf(lse[0, 0, :7]).all() and torch.equal(lse[0, 1, :7], torch.full((7,), 0.5))
    grads = torch.autograd.grad(out.float().sum() + lse[torch.isfinite(lse)].sum(), (q, k, v, sinks))
    assert all(torch.isfinite(g).all() for g in grads)


def test_combine_backward_is_finite_where_no_block_attends():
    """logsumexp's backward is NaN on a row of -inf even for a zero gradient; combine keeps it out of the blocks'
    gradients (causal 6 queries x 4 keys: the first two rows attend no key of either block)."""
    q, k, v = random_qkv(1, 6, 4, 2, 2, 16, torch.float32, requires_grad=True)
    parts = [fa3nn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True),
             fa3nn.flash_attn_func(q, k[:, :0], v[:, :0], return_attn_probs=True)]
    out, _ = fa3nn.flash_attn_combine(torch.stack([o for o, _ in parts]),
                                      torch.stack([lse.transpose(1, 2) for _, lse in parts]))
    assert torch.equal(out, parts[0][0])
    assert all(torch.isfinite(g).all() for g in torch.autograd.grad(out.sum(), (q, k, v)))


@pytest.mark.parametrize("sinks,error,match", [
    ([0.0] * 4, TypeError, r"sinks must be a floating torch.Tensor \(nheads,\) = \(4,\) or None, got list"),
    (torch.zeros(2), ValueError, r"sinks must be a floating tensor of shape \(nheads,\) = \(4,\)"),
    (torch.zeros(4, dtype=torch.int64), ValueError, r"sinks must be a floating tensor"),
], ids=["list", "shape", "dtype"])
def test_sinks_refused_clearly(sinks, error, match):
    q, k, v = random_qkv(2, 5, 6, 4, 2, 16, torch.float32)
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_func(q, k, v, sinks=sinks)


def test_combine_equals_attention_over_all_keys():
    """Attention over keys split into blocks, put together by flash_attn_combine, is attention over all keys (output,
    lse, gradients); a block no row attends (lse -inf, output NaN) changes nothing."""
    q, k, v = random_qkv(2, 9, 30, 4, 2, 16, torch.float64, requires_grad=True)
    full, full_lse = fa3nn.flash_attn_func(q, k, v, return_attn_probs=True)
    parts = [fa3nn.flash_attn_func(q, k[:, a:b], v[:, a:b], return_attn_probs=True) for a, b in ((0, 7), (7, 30))]
    out_partial = torch.stack([o.float() for o, _ in parts] + [torch.full_like(parts[0][0], float("nan")).float()])
    lse_partial = torch.stack([lse.transpose(1, 2).float() for _, lse in parts] + [
        torch.full_like(parts[0][1].transpose(1, 2), float("-inf")).float()])
    out, lse = fa3nn.flash_attn_combine(out_partial, lse_partial)
    assert out.dtype == torch.float32 and lse.shape == (2, 9, 4)
    torch.testing.assert_close(out, full.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, full_lse.transpose(1, 2).float(), rtol=1e-5, atol=1e-5)
    dout = torch.randn_like(full)
    expected = torch.autograd.grad(full, (q, k, v), dout)
    for g, g_ref in zip(torch.autograd.grad(out, (q, k, v), dout.float()), expected):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-4)
    into = torch.empty(2, 9, 4, 16, dtype=torch.bfloat16)
    assert fa3nn.flash_attn_combine(out_partial.detach(), lse_partial.detach(), out=into)[0] is into
    torch.testing.assert_close(into, full.detach().to(torch.bfloat16))
    nowhere, nowhere_lse = fa3nn.flash_attn_combine(out_partial[2:], lse_partial[2:])  # no block attends any row
    assert torch.equal(nowhere, torch.zeros_like(nowhere)) and torch.isneginf(nowhere_lse).all()


def test_combine_takes_lse_transposed_when_seqlen_equals_nheads():
    """flash_attn_func's lse is (batch, nheads, seqlen), lse_partial (num_splits, batch, seqlen, nheads): with
    seqlen == nheads the shapes agree, so only the documented transpose gives attention over all keys (the docstring
    said the returned lse could be passed as it is: 0.8 off here)."""
    q, k, v = random_qkv(1, 4, 16, 4, 4, 16, torch.float64)
    full = fa3nn.flash_attn_func(q, k, v)
    parts = [fa3nn.flash_attn_func(q, k[:, a:a + 8], v[:, a:a + 8], return_lse=True) for a in (0, 8)]
    out_partial = torch.stack([o.float() for o, _ in parts])
    out, _ = fa3nn.flash_attn_combine(out_partial, torch.stack([lse.transpose(-1, -2).float() for _, lse in parts]))
    torch.testing.assert_close(out, full.float(), rtol=1e-5, atol=1e-5)
    untransposed, _ = fa3nn.flash_attn_combine(out_partial, torch.stack([lse.float() for _, lse in parts]))
    assert (untransposed - full.float()).abs().max() > 1e-2  # what the old docstring's advice gave
    assert "stack each block's\nlse.transpose(-1, -2)" in fa3nn.combine.__doc__


def test_combine_propagates_nan_and_positive_infinite_lse():
    """A NaN or +inf block lse gives NaN out and lse for its row (it gave out 0 / lse -inf, or finite out and lse
    +inf); -inf blocks still contribute nothing, and a row of only -inf blocks is zeros with lse -inf."""
    out_partial = torch.arange(24, dtype=torch.float32).view(2, 1, 3, 1, 4)
    nan, inf = float("nan"), float("inf")
    lse_partial = torch.tensor([[nan, inf, -inf], [nan, 0.0, 0.0]]).view(2, 1, 3, 1)
    out, lse = fa3nn.flash_attn_combine(out_partial, lse_partial)
    assert torch.isnan(out[0, :2]).all() and torch.isnan(lse[0, :2]).all()
    assert torch.equal(out[0, 2], out_partial[1, 0, 2]) and lse[0, 2, 0].item() == 0.0  # the -inf block: nothing
    one_nan, one_nan_lse = fa3nn.flash_attn_combine(out_partial, torch.tensor([[0.0, nan, 0.0], [0.0] * 3]).view(
        2, 1, 3, 1))
    assert torch.isnan(one_nan[0, 1]).all() and torch.isnan(one_nan_lse[0, 1]).all()
    assert torch.isfinite(one_nan[0, 0::2]).all() and torch.isfinite(one_nan_lse[0, 0::2]).all()
    nowhere, nowhere_lse = fa3nn.flash_attn_combine(out_partial, torch.full((2, 1, 3, 1), -inf))
    assert torch.equal(nowhere, torch.zeros_like(nowhere)) and torch.isneginf(nowhere_lse).all()


@pytest.mark.parametrize("args,error,match", [
    ((torch.zeros(2, 1, 3, 4, 8, dtype=torch.float64), torch.zeros(2, 1, 3, 4)), ValueError,
     r"out_partial must be float32 with 5 dims"),
    ((torch.zeros(2, 1, 3, 4, 8), torch.zeros(2, 1, 4, 3)), ValueError,
     r"lse_partial must be \(num_splits, batch, seqlen, nheads\) = \(2, 1, 3, 4\) on cpu, got \(2, 1, 4, 3\) on cpu "
     r"\(the \(batch, nheads, seqlen\) layout flash_attn_func returns: stack lse.transpose\(-1, -2\)\)"),
    ((torch.zeros(2, 1, 3, 4, 8), torch.zeros(2, 1, 3, 4), torch.zeros(1, 3, 4, 7)), ValueError,
     r"out must be a torch.float32 tensor of shape \(1, 3, 4, 8\)"),
    ((torch.zeros(2, 1, 3, 4, 8), torch.zeros(2, 1, 3, 4), None, torch.int32), ValueError, r"out_dtype must be one of"),
    (([1.0], torch.zeros(2, 1, 3, 4)), TypeError, r"out_partial must be a float32 torch.Tensor, got list"),
], ids=lambda x: "")
def test_combine_refused_clearly(args, error, match):
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_combine(*args)


def _slot_masks(used, slot):
    return torch.arange(slot, device=used.device).view(1, -1) < used.view(-1, 1)


def check_seqused(q, k, v, used_q, used_k, layout, causal, window_size, backend="auto"):
    """Sequence i uses the first seqused[i] rows of its slot: the same as attention_ref with right-padding masks of
    those lengths (the error-ratio rule); padding query rows get zeros and lse -inf, padding rows zero gradients."""
    batch, slot_q, nheads, d = q.shape
    slot_k = k.shape[1]
    mask_q, mask_k = _slot_masks(used_q, slot_q), _slot_masks(used_k, slot_k)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    cu_q = torch.arange(batch + 1, dtype=torch.int32, device=q.device) * slot_q
    cu_k = torch.arange(batch + 1, dtype=torch.int32, device=q.device) * slot_k
    flat = [t.reshape(-1, *t.shape[2:]) for t in leaves]
    args = {"packed": (*flat, cu_q, cu_k, slot_q, slot_k), "dense_q_dense_k": (*leaves, None, None, None, None),
            "packed_q_dense_k": (flat[0], *leaves[1:], cu_q, None, slot_q, None)}[layout]
    out, lse = fa3nn.flash_attn_varlen_func(*args, used_q, used_k, causal=causal, window_size=window_size,
                                            return_attn_probs=True, backend=backend)
    if layout != "dense_q_dense_k":
        assert out.shape == (batch * slot_q, nheads, d) and lse.shape == (nheads, batch * slot_q)
        out, lse = out.view(batch, slot_q, nheads, d), lse.view(nheads, batch, slot_q).transpose(0, 1)
    assert out.shape == q.shape and lse.shape == (batch, nheads, slot_q)
    refs = [t.detach().requires_grad_() for t in (q, k, v)]
    kwargs = dict(causal=causal, window_size=window_size)
    out_ref, lse_ref = attention_ref(*refs, mask_q, mask_k, **kwargs)
    out_pt, _ = attention_ref(*refs, mask_q, mask_k, upcast=False, reorder_ops=True, **kwargs)
    assert torch.equal(out[~mask_q], torch.zeros_like(out[~mask_q]))
    assert torch.isneginf(lse.transpose(1, 2)[~mask_q]).all()
    assert_error_ratio(out, out_ref, out_pt, "out")
    torch.testing.assert_close(lse.transpose(1, 2)[mask_q], lse_ref.transpose(1, 2)[mask_q], rtol=1e-3, atol=1e-3)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, leaves, dout)
    grads_ref = torch.autograd.grad(out_ref, refs, dout)
    grads_pt = torch.autograd.grad(out_pt, refs, dout)
    for name, g, g_ref, g_pt, m in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt, (mask_q, mask_k, mask_k)):
        assert torch.equal(g[~m], torch.zeros_like(g[~m])), name
        assert_error_ratio(g, g_ref, g_pt, name)


@pytest.mark.parametrize("causal", [False, True])
def test_seqused_with_sinks(causal):
    """Sinks with seqused: padding query rows get zeros and lse = the head's sink (a row that attends no key,
    fa3nn.slots); used rows equal the packed call of the used rows alone, out, lse and every gradient (the sinks' too,
    padding rows' zero)."""
    q, k, v = random_qkv(3, 8, 9, 4, 2, 16, torch.float64)
    sinks = torch.randn(4, dtype=torch.float64)
    used_q, used_k = torch.tensor([8, 3, 0], dtype=torch.int32), torch.tensor([9, 4, 5], dtype=torch.int32)
    leaves = [t.detach().requires_grad_() for t in (q, k, v, sinks)]
    flat = [t.reshape(-1, *t.shape[2:]) for t in leaves[:3]]
    cu_q, cu_k = (torch.arange(4, dtype=torch.int32) * n for n in (8, 9))
    out, lse = fa3nn.flash_attn_varlen_func(*flat, cu_q, cu_k, 8, 9, used_q, used_k, causal=causal,
                                            sinks=leaves[3], return_attn_probs=True, backend="reference")
    rows_q = torch.cat([torch.arange(8 * i, 8 * i + n) for i, n in enumerate(used_q.tolist())])
    rows_k = torch.cat([torch.arange(9 * i, 9 * i + n) for i, n in enumerate(used_k.tolist())])
    padding = torch.ones(24, dtype=torch.bool)
    padding[rows_q] = False
    assert torch.equal(out[padding], torch.zeros_like(out[padding]))
    assert torch.equal(lse[:, padding], leaves[3][:, None].detach().expand(4, int(padding.sum())))

    refs = [t.detach().requires_grad_() for t in (q, k, v, sinks)]
    packed = [refs[0].reshape(-1, 4, 16)[rows_q]] + [t.reshape(-1, 2, 16)[rows_k] for t in refs[1:3]]
    cu = [torch.tensor([0, *torch.cumsum(u, 0).tolist()], dtype=torch.int32) for u in (used_q, used_k)]
    out_ref, lse_ref = fa3nn.flash_attn_varlen_func(*packed, *cu, 8, 9, causal=causal, sinks=refs[3],
                                                    return_attn_probs=True, backend="reference")
    torch.testing.assert_close(out[rows_q], out_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(lse[:, rows_q], lse_ref, rtol=0, atol=1e-12)
    dout = torch.randn_like(out)
    dout[padding] = 0  # padding rows carry no loss (their zero output has no gradient to give)
    grads = torch.autograd.grad(out, leaves, dout)
    grads_ref = torch.autograd.grad(out_ref, refs, dout[rows_q])
    for g, g_ref in zip(grads, grads_ref):  # padding rows: zero in both (the reference never sees them)
        torch.testing.assert_close(g, g_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("causal,window_size", [(False, (-1, -1)), (True, (-1, -1)), (False, (5, 2))])
@pytest.mark.parametrize("layout", ["packed", "dense_q_dense_k", "packed_q_dense_k"])
def test_seqused_matches_padding_masks(dtype, causal, window_size, layout):
    q, k, v = random_qkv(4, 13, 17, 4, 2, 16, dtype)
    used_q = torch.tensor([13, 0, 6, 9], dtype=torch.int32)
    used_k = torch.tensor([17, 5, 0, 11], dtype=torch.int32)
    check_seqused(q, k, v, used_q, used_k, layout, causal, window_size)


def test_seqused_boundaries_are_read_once_and_reused(monkeypatch):
    """The same tensors give the same boundary tensors (whose checked values fa3nn.checks remembers), so a model
    whose layers share them reads a GPU seqused on the host once (remember_cpu=True stands in for a GPU tensor here);
    a CPU one is read at every call (no sync to save), and still gives the same boundary tensors."""
    q, k, v = random_qkv(3, 8, 8, 2, 2, 16, torch.float32)
    used = torch.tensor([8, 3, 5], dtype=torch.int32)
    reads, lookup = [], slots._used_values._lookup

    def counting(tensor, key, compute):
        return lookup(tensor, key, lambda: reads.append(key) or compute())

    monkeypatch.setattr(slots._used_values, "_lookup", counting)
    first = slots.to_packed(q, k, v, None, None, None, None, used, None)
    second = slots.to_packed(q, k, v, None, None, None, None, used, None)
    assert reads == ["values", "values"]
    assert second.cu_seqlens_q is first.cu_seqlens_q and second.cu_seqlens_k is first.cu_seqlens_k
    monkeypatch.setattr(slots._used_values, "remember_cpu", True)
    slots.to_packed(q, k, v, None, None, None, None, used, None)
    third = slots.to_packed(q, k, v, None, None, None, None, used, None)
    assert reads == ["values"] * 3 and third.cu_seqlens_q is first.cu_seqlens_q
    assert first.cu_seqlens_q.tolist() == [0, 8, 8, 8, 11, 16, 16, 21, 24, 24]
    assert first.cu_seqlens_k.tolist() == [0, 8, 8, 8, 16, 16, 16, 24, 24, 24]  # every key used


@pytest.mark.parametrize("case,error,match", [
    ("over", ValueError, r"seqused_q\[1\] = 9 must be in \[0, 8\], the rows of slot 1"),
    ("negative", ValueError, r"seqused_k\[0\] = -1 must be in \[0, 8\]"),
    ("dtype", ValueError, r"seqused_q must be int32 of shape \(batch,\) = \(2,\)"),
    ("shape", ValueError, r"seqused_q must be int32 of shape \(batch,\) = \(2,\) on cpu, got torch.int32 \(3,\)"),
    ("list", TypeError, r"seqused_k must be an int32 torch.Tensor"),
    ("max_seqlen", ValueError, r"max_seqlen_q \(5\) is smaller than the longest sequence of q \(seqused_q\) \(8\)"),
    ("q_none", TypeError, r"q must be a torch.Tensor, got NoneType"),
    ("batches", ValueError, r"q's and k's sequences must match in number: dense q has 2, dense k / v has 3"),
    ("k_v", ValueError, r"dense k and v must share \(batch, seqlen\), got \{'k': \(2, 8\), 'v': \(2, 9\)\}"),
    ("nothing", TypeError, r"flash_attn_varlen_func needs cu_seqlens_q and cu_seqlens_k"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_seqused_refused_clearly(case, error, match):
    q, k, v = random_qkv(2, 8, 8, 2, 2, 16, torch.float32)
    used = {
        "over": dict(seqused_q=torch.tensor([8, 9], dtype=torch.int32)),
        "negative": dict(seqused_k=torch.tensor([-1, 2], dtype=torch.int32)),
        "dtype": dict(seqused_q=torch.tensor([8, 2])),
        "shape": dict(seqused_q=torch.tensor([8, 2, 1], dtype=torch.int32)),
        "list": dict(seqused_k=[8, 2]),
        "max_seqlen": dict(seqused_q=torch.tensor([8, 2], dtype=torch.int32)),
        "nothing": dict(),
    }.get(case, dict(seqused_k=torch.tensor([8, 2], dtype=torch.int32)))
    max_q = 5 if case == "max_seqlen" else None
    if case == "q_none":
        q = None
    elif case == "batches":
        k, v = (torch.randn(3, 8, 2, 16) for _ in range(2))
    elif case == "k_v":
        v = torch.randn(2, 9, 2, 16)
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_varlen_func(q, k, v, None, None, max_q, None, **used)


def test_max_seqlen_bounds_the_used_lengths():
    """As in FlashAttention-3, max_seqlen bounds what is attended: a dense side's may be any value >= its used
    lengths (FlashAttention-3 ignores it), a packed side with seqused needs to cover the used rows only."""
    q, k, v = random_qkv(2, 6, 64, 2, 2, 16, torch.float64)
    used_k = torch.tensor([20, 9], dtype=torch.int32)
    expected = fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, None, used_k, causal=True)
    for max_k in (20, 64, 100):  # FlashAttention-3's decoding call passes max(seqused_k)
        got = fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, max_k, None, used_k, causal=True)
        assert torch.equal(got, expected)
    with pytest.raises(ValueError, match=r"max_seqlen_k \(19\) is smaller than the longest sequence of k "
                                         r"\(seqused_k\) \(20\)"):
        fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, 19, None, used_k)
    flat_q = q.reshape(12, 2, 16)
    cu_q = torch.tensor([0, 6, 12], dtype=torch.int32)
    used_q = torch.tensor([3, 2], dtype=torch.int32)
    packed = fa3nn.flash_attn_varlen_func(flat_q, k, v, cu_q, None, 3, None, used_q, used_k, causal=True)
    dense = fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, used_q, used_k, causal=True)
    assert torch.equal(packed, dense.reshape(12, 2, 16))
    with pytest.raises(ValueError, match=r"max_seqlen_q \(5\) is smaller than the longest sequence \(6\) in "
                                         r"cu_seqlens_q"):
        fa3nn.flash_attn_varlen_func(flat_q, k, v, cu_q, None, 5, None, None, used_k)


def test_slots_after_inference_mode_train():
    """Boundaries cached during an inference_mode evaluation serve later training calls (no inference tensors)."""
    q, k, v = random_qkv(2, 6, 6, 2, 2, 16, torch.float32)
    used = torch.tensor([6, 3], dtype=torch.int32)
    with torch.inference_mode():
        evaluated = fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, used)
    leaf = q.clone().requires_grad_()
    trained = fa3nn.flash_attn_varlen_func(leaf, k, v, None, None, None, None, used)
    trained.sum().backward()
    assert torch.equal(trained.detach(), evaluated) and leaf.grad is not None


def test_varlen_dense_q_outputs_are_contiguous_and_qv_checked_unflattened():
    q, k, v = random_qkv(2, 6, 6, 4, 2, 16, torch.float32)
    used = torch.tensor([6, 3], dtype=torch.int32)
    out, lse = fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, used, return_attn_probs=True)
    assert out.is_contiguous() and lse.is_contiguous() and lse.shape == (2, 4, 6)
    sequence_first_qv = torch.randn(6, 2, 4, 16)  # flattens to q's packed shape, but is not q's layout
    with pytest.raises(ValueError, match=r"qv must have q's shape with v's headdim \(2, 6, 4, 16\)"):
        fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, used, qv=sequence_first_qv)


@pytest.mark.parametrize("gqa", [False, True], ids=["mha", "gqa"])
def test_qkvpacked_matches_separate_tensors(gqa):
    batch, seqlen, nheads, nheads_kv, d = 2, 11, 4, 2 if gqa else 4, 16
    if gqa:
        qkv = torch.randn(batch, seqlen, nheads + 2 * nheads_kv, d, dtype=torch.float64, requires_grad=True)
        out = fa3nn.flash_attn_qkvpacked_func(qkv, causal=True, num_heads_q=nheads)
        q, k, v = qkv.detach().split([nheads, nheads_kv, nheads_kv], dim=2)
    else:
        qkv = torch.randn(batch, seqlen, 3, nheads, d, dtype=torch.float64, requires_grad=True)
        out = fa3nn.flash_attn_qkvpacked_func(qkv, causal=True)
        q, k, v = qkv.detach().unbind(2)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = fa3nn.flash_attn_func(*leaves, causal=True)
    assert torch.equal(out, expected)
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, qkv, dout)
    grads = torch.autograd.grad(expected, leaves, dout)
    assert dqkv.shape == qkv.shape
    assert torch.equal(dqkv, torch.cat(grads, dim=2) if gqa else torch.stack(grads, dim=2))


@pytest.mark.parametrize("shape,num_heads_q,match", [
    ((2, 5, 4, 4, 16), None, r"a 5-D qkv must be \(batch, seqlen, 3, nheads, headdim\)"),
    ((2, 5, 3, 4, 16), 2, r"a 5-D qkv must be .* num_heads_q None or nheads"),
    ((2, 5, 8, 16), None, r"needs num_heads_q, an int in \(0, 8\)"),
    ((2, 5, 8, 16), 3, r"leaving an even count for k and v; got 3"),
], ids=lambda x: "")
def test_qkvpacked_refused_clearly(shape, num_heads_q, match):
    with pytest.raises(ValueError, match=match):
        fa3nn.flash_attn_qkvpacked_func(torch.randn(shape), num_heads_q=num_heads_q)


@pytest.mark.parametrize("shape", [(2, 5, 12, 16), (2, 5, 3, 8, 16)], ids=["4d", "5d"])
def test_qkvpacked_num_heads_q_is_an_integer_in_both_layouts(shape):
    """The 4-D layout refused np.int64(8) while the 5-D one took 4.0 / 8.0: both take ints and numpy integers (as
    max_seqlen does) and refuse floats and bools, naming num_heads_q."""
    qkv = torch.randn(shape)
    out = fa3nn.flash_attn_qkvpacked_func(qkv, num_heads_q=np.int64(8))
    assert torch.equal(out, fa3nn.flash_attn_qkvpacked_func(qkv, num_heads_q=8))
    for bad in (8.0, True):
        with pytest.raises(TypeError, match=f"num_heads_q must be an int .* got {type(bad).__name__} {bad}"):
            fa3nn.flash_attn_qkvpacked_func(qkv, num_heads_q=bad)


def _per_head_quantized(q, k, v, cu_q=None, cu_k=None, max_q=None, max_k=None):
    """CurrentScaling's quantization (one scale per (sequence, head)): what it hands its FP8 kernels."""
    return quantize_qkv_tensors(q, k, v, 0, 0, None, None, cu_q, cu_k, max_q, max_k)


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fp8_inputs_run_current_scalings_forward(varlen, causal):
    """e4m3 inputs with the descales CurrentScaling would compute give, bit for bit, what fp8=CurrentScaling() gives
    on the high-precision inputs (the same FP8 forward path, entered from the two ends)."""
    batch, seqlen_q, seqlen_k, nheads, d = 3, 37, 45, 2, 64
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads, d, torch.bfloat16)
    if varlen:
        mask_q = torch.arange(seqlen_q) < torch.tensor([37, 20, 1]).view(-1, 1)
        mask_k = torch.arange(seqlen_k) < torch.tensor([45, 3, 30]).view(-1, 1)
        (q, cu_q, max_q), (k, cu_k, max_k) = unpad(q, mask_q), unpad(k, mask_k)
        v = unpad(v, mask_k)[0]
        quantized = _per_head_quantized(q, k, v, cu_q, cu_k, max_q, max_k)
        descales = [d_.squeeze(-1) for d_ in (quantized.q_descale, quantized.k_descale, quantized.v_descale)]
        out, lse = fa3nn.flash_attn_varlen_func(quantized.q, quantized.k, quantized.v, cu_q, cu_k, max_q, max_k,
                                                causal=causal, q_descale=descales[0], k_descale=descales[1],
                                                v_descale=descales[2], return_attn_probs=True)
        expected = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal,
                                                fp8=CurrentScaling(), return_lse=True)
    else:
        quantized = _per_head_quantized(q, k, v)
        descales = [d_.squeeze(-1) for d_ in (quantized.q_descale, quantized.k_descale, quantized.v_descale)]
        out, lse = fa3nn.flash_attn_func(quantized.q, quantized.k, quantized.v, None, causal, None, *descales,
                                         return_attn_probs=True)
        expected = fa3nn.flash_attn_func(q, k, v, causal=causal, fp8=CurrentScaling(), return_lse=True)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert torch.equal(out, expected[0]) and torch.equal(lse, expected[1])


def test_fp8_inputs_with_seqused_are_the_unpadded_call():
    """Dense slots with seqused and a descale per (sequence, K/V head) give, bit for bit, the packed call on the used
    rows alone (the descales follow their sequence through the three-sequences-per-slot split)."""
    batch, slot_q, slot_k, nheads, nheads_kv, d = 3, 20, 29, 4, 2, 64
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(batch, s, h, d).mul(3).to(e4m3)
                  for s, h in ((slot_q, nheads), (slot_k, nheads_kv), (slot_k, nheads_kv)))
    descales = [torch.rand(batch, nheads_kv) + 0.5 for _ in range(3)]
    used_q, used_k = torch.tensor([20, 7, 0], dtype=torch.int32), torch.tensor([3, 29, 11], dtype=torch.int32)
    out, lse = fa3nn.flash_attn_varlen_func(q8, k8, v8, None, None, None, None, used_q, used_k, causal=True,
                                            q_descale=descales[0], k_descale=descales[1], v_descale=descales[2],
                                            return_attn_probs=True)
    mask_q, mask_k = _slot_masks(used_q, slot_q), _slot_masks(used_k, slot_k)
    (pq, cu_q, _), (pk, cu_k, _) = unpad(q8.view(torch.uint8), mask_q), unpad(k8.view(torch.uint8), mask_k)
    pv = unpad(v8.view(torch.uint8), mask_k)[0]
    packed = fa3nn.flash_attn_varlen_func(*(t.view(e4m3) for t in (pq, pk, pv)), cu_q, cu_k, slot_q, slot_k,
                                          causal=True, q_descale=descales[0], k_descale=descales[1],
                                          v_descale=descales[2], return_attn_probs=True)
    assert torch.equal(out[mask_q], packed[0]) and torch.equal(out[~mask_q], torch.zeros_like(out[~mask_q]))
    assert torch.equal(lse.transpose(1, 2)[mask_q], packed[1].T)
    with pytest.raises(ValueError, match=r"q_descale must be float32 of shape \(batch, nheads_kv\) = \(3, 2\)"):
        fa3nn.flash_attn_varlen_func(q8, k8, v8, None, None, None, None, used_q, used_k, q_descale=torch.ones(9, 2))


def test_fp8_inputs_with_seqused_refuse_bf16_as_fp8_inputs():
    q, k, v = random_qkv(2, 8, 8, 2, 2, 64, torch.bfloat16)
    with pytest.raises(TypeError, match=r"q, k and v must all be torch.float8_e4m3fn"):
        fa3nn.flash_attn_varlen_func(q, k, v, None, None, None, None, torch.tensor([8, 2], dtype=torch.int32),
                                     q_descale=torch.ones(2, 2))


def test_fp8_inputs_gqa_against_dequantized_attention():
    """GQA with a descale per K/V head, shared by the query heads of its group (FlashAttention-3's layout): close to
    exact attention on the dequantized inputs (the e4m3 rounding of P is what separates them)."""
    batch, seqlen, nheads, nheads_kv, d = 2, 64, 4, 2, 64
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(batch, seqlen, h, d).mul(4).to(e4m3) for h in (nheads, nheads_kv, nheads_kv))
    descales = [torch.rand(batch, nheads_kv) + 0.5 for _ in range(3)]
    out = fa3nn.flash_attn_func(q8, k8, v8, None, True, None, *descales)
    group = nheads // nheads_kv
    deq = [x.float() * s.repeat_interleave(n // nheads_kv, 1)[:, None, :, None]
           for x, s, n in zip((q8, k8, v8), descales, (nheads, nheads_kv, nheads_kv))]
    expected, _ = attention_ref(*deq, causal=True)
    assert group == 2 and out.dtype == torch.bfloat16
    sqnr = fa3nn.fp8.sqnr_db(expected, out.float())
    assert sqnr > 25, sqnr
    no_descale = fa3nn.flash_attn_func(q8, k8, v8, causal=True)  # None = 1
    assert fa3nn.fp8.sqnr_db(attention_ref(q8.float(), k8.float(), v8.float(), causal=True)[0], no_descale.float()) > 25


def test_fp8_inputs_compile_fullgraph():
    q, k, v = random_qkv(2, 16, 16, 2, 2, 64, torch.bfloat16)
    quantized = _per_head_quantized(q, k, v)
    descales = [d_.squeeze(-1) for d_ in (quantized.q_descale, quantized.k_descale, quantized.v_descale)]

    def f(q8, k8, v8, qd, kd, vd):
        return fa3nn.flash_attn_func(q8, k8, v8, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)

    eager = f(quantized.q, quantized.k, quantized.v, *descales)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(quantized.q, quantized.k, quantized.v, *descales)
    assert torch.equal(compiled, eager)


def test_explain_fp8_inputs():
    q8, k8, v8 = (torch.randn(2, 8, h, 64).to(torch.float8_e4m3fn) for h in (4, 2, 2))
    found = fa3nn.explain(q8, k8, v8, causal=True)
    assert found.forward == "fp8 emulation (reference)" and found.backward == "none (FP8 inputs have no backward)"
    assert "needs a Hopper GPU" in found.forward_refusals["hopper"] and found.backward_refusals == {}
    with pytest.raises(ValueError, match=r"asks fa3nn to quantize"):
        fa3nn.explain(q8, k8, v8, fp8=True)


@pytest.mark.parametrize("case,error,match", [
    ("mixed", TypeError, r"q, k and v must all be torch.float8_e4m3fn"),
    ("grad", ValueError, r"q require grad, but FP8 inputs have no backward"),
    ("recipe", ValueError, r"fp8='per_tile' asks fa3nn to quantize, but q, k, v are already e4m3"),
    ("descale_shape", ValueError, r"k_descale must be float32 of shape \(batch, nheads_kv\) = \(2, 2\)"),
    ("descale_type", TypeError, r"v_descale must be a float32 torch.Tensor"),
    ("qv", ValueError, r"qv with FP8 inputs is not supported"),
    ("k_none", TypeError, r"k must be a torch.Tensor of layout \(batch, seqlen, nheads, headdim\), got NoneType"),
    ("descale_grad", ValueError, r"q_descale requires grad, but FP8 inputs have no backward"),
    ("deterministic", TypeError, r"deterministic must be a bool"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_fp8_inputs_refused_clearly(case, error, match):
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(2, 8, h, 64).to(e4m3) for h in (4, 2, 2))
    kwargs = {}
    if case == "mixed":
        v8 = v8.to(torch.bfloat16)
    elif case == "grad":
        q8 = q8.requires_grad_()
    elif case == "recipe":
        kwargs = dict(fp8="per_tile")
    elif case == "descale_shape":
        kwargs = dict(k_descale=torch.ones(2, 4))
    elif case == "descale_type":
        kwargs = dict(v_descale=2.0)
    elif case == "k_none":
        k8 = None
    elif case == "descale_grad":
        kwargs = dict(q_descale=torch.ones(2, 2, requires_grad=True))
    elif case == "deterministic":
        kwargs = dict(deterministic="yes")
    else:
        kwargs = dict(qv=torch.zeros(2, 8, 4, 64, dtype=e4m3))
    with pytest.raises(error, match=match):
        fa3nn.flash_attn_func(q8, k8, v8, **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "hopper"])
@pytest.mark.parametrize("layout", ["packed", "dense_q_dense_k"])
def test_seqused_gpu(backend, layout):
    """seqused on the GPU backends: the three-sequences-per-slot split has sequences with queries and no keys and
    the reverse, which their varlen paths must handle (a hopper backward it cannot run goes to auto's choice)."""
    if backend == "hopper" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the hopper backend needs sm_90")
    q, k, v = random_qkv(4, 300, 517, 8, 2, 128, torch.bfloat16, device="cuda")
    used_q = torch.tensor([300, 0, 133, 257], dtype=torch.int32, device="cuda")
    used_k = torch.tensor([517, 64, 0, 300], dtype=torch.int32, device="cuda")
    check_seqused(q, k, v, used_q, used_k, layout, True, (-1, -1), backend)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["hopper", "triton"])
@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_fp8_inputs_gpu(backend, varlen, causal):
    """FP8 inputs (GQA, descales per K/V head) on the FP8 kernels: within the error-ratio rule of fp64 attention on
    the dequantized inputs, with the emulation of the kernels' rounding points (backend="reference") as the yardstick.
    """
    if backend == "hopper" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the hopper backend needs sm_90")
    batch, seqlen_q, seqlen_k, nheads, nheads_kv, d = 2, 1000, 1531, 8, 2, 128
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(batch, s, h, d, device="cuda").mul(3).to(e4m3)
                  for s, h in ((seqlen_q, nheads), (seqlen_k, nheads_kv), (seqlen_k, nheads_kv)))
    descales = [torch.rand(batch, nheads_kv, device="cuda") + 0.5 for _ in range(3)]
    deq = [x.float() * s.repeat_interleave(x.shape[2] // nheads_kv, 1)[:, None, :, None]
           for x, s in zip((q8, k8, v8), descales)]
    if varlen:  # the same sequences, packed
        args = [x.reshape(-1, nheads if i == 0 else nheads_kv, d) for i, x in enumerate((q8, k8, v8))]
        args += [torch.arange(batch + 1, dtype=torch.int32, device="cuda") * s for s in (seqlen_q, seqlen_k)]
        args += [seqlen_q, seqlen_k]
        run = fa3nn.flash_attn_varlen_func
    else:
        args, run = [q8, k8, v8], fa3nn.flash_attn_func
    outs = [run(*args, causal=causal, q_descale=descales[0], k_descale=descales[1], v_descale=descales[2],
                return_attn_probs=True, backend=name) for name in (backend, "reference")]
    if varlen:
        outs = [(out.view(batch, seqlen_q, nheads, d), lse.view(nheads, batch, seqlen_q).transpose(0, 1))
                for out, lse in outs]
    (out, lse), (out_emulated, lse_emulated) = outs
    truth, lse_truth = attention_ref(*deq, causal=causal)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert_error_ratio(out, truth, out_emulated, "out")
    assert_error_ratio(lse, lse_truth, lse_emulated, "lse")


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "hopper"])
@pytest.mark.parametrize("seqlens", [(2048, 2048), (700, 1900)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_attention_chunk_gpu(backend, seqlens):
    """Chunked causal attention (chunks of 384 keys) on the GPU backends' varlen paths, forward and backward, by the
    error-ratio rule against the chunk mask written out (fp32 reference, bf16 yardstick)."""
    if backend == "hopper" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the hopper backend needs sm_90")
    q, k, v = random_qkv(2, *seqlens, 8, 2, 128, torch.bfloat16, device="cuda", requires_grad=True)
    out = fa3nn.flash_attn_func(q, k, v, causal=True, attention_chunk=384, backend=backend)
    refs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    pts = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out_ref = _chunked_attention(*refs, 384, True, (-1, -1))
    out_pt = _chunked_attention(*pts, 384, True, (-1, -1))
    assert_error_ratio(out, out_ref, out_pt, "out")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_ref = torch.autograd.grad(out_ref, refs, dout.float())
    grads_pt = torch.autograd.grad(out_pt, pts, dout)
    for name, g, g_ref, g_pt in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt):
        assert_error_ratio(g, g_ref, g_pt, name)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["triton", "hopper"])
def test_sinks_gpu(backend):
    """gpt-oss's sinks on the GPU backends: the lse gradient their backward takes carries the sinks' share (the
    error-ratio rule against the sink attention written out, fp32 reference, bf16 yardstick)."""
    if backend == "hopper" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the hopper backend needs sm_90")
    q, k, v = random_qkv(2, 1024, 1024, 8, 2, 64, torch.bfloat16, device="cuda", requires_grad=True)
    sinks = torch.randn(8, device="cuda", requires_grad=True)
    out = fa3nn.flash_attn_func(q, k, v, causal=True, sinks=sinks, backend=backend)
    refs = [t.detach().float().requires_grad_() for t in (q, k, v, sinks)]
    pts = [t.detach().clone().requires_grad_() for t in (q, k, v)] + [sinks.detach().clone().requires_grad_()]
    out_ref = _attention_with_sinks(*refs, causal=True)[0]
    out_pt = _attention_with_sinks(*pts[:3], pts[3].to(torch.bfloat16), causal=True)[0]
    assert_error_ratio(out, out_ref, out_pt, "out")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v, sinks), dout)
    grads_ref = torch.autograd.grad(out_ref, refs, dout.float())
    grads_pt = torch.autograd.grad(out_pt, pts, dout)
    for name, g, g_ref, g_pt in zip(("dq", "dk", "dv", "dsinks"), grads, grads_ref, grads_pt):
        assert_error_ratio(g, g_ref, g_pt, name)


class _KernelReached(Exception):
    pass


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_fp8_inputs_reach_the_kernel_path_with_its_arguments(monkeypatch, varlen):
    """The kernel paths of FP8 inputs (GPU only) are called as fa3nn.dispatch.FP8Path documents: a stand-in kernel on
    the CPU records its arguments (s48a: a changed signature left this caller passing cu_seqlens where the kernel
    path takes a Varlen, and every GPU FP8-inputs call raised TypeError)."""
    from fa3nn import dispatch

    seen = {}

    def kernel(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        raise _KernelReached

    monkeypatch.setitem(dispatch.FP8_FORWARD_PATHS, "reference",
                        dispatch.FP8Path("stand-in", lambda *_: None, kernel=kernel, varlen_deal=True))
    batch, seqlen_q, seqlen_k, nheads, d = 2, 9, 13, 2, 64
    e4m3 = torch.float8_e4m3fn
    q8, k8, v8 = (torch.randn(batch, s, nheads, d).to(e4m3) for s in (seqlen_q, seqlen_k, seqlen_k))
    descales = [torch.rand(batch, nheads) + 0.5 for _ in range(3)]
    cu_q, cu_k = (torch.arange(batch + 1, dtype=torch.int32) * s for s in (seqlen_q, seqlen_k))
    with pytest.raises(_KernelReached):
        if varlen:
            fa3nn.flash_attn_varlen_func(*(x.flatten(0, 1) for x in (q8, k8, v8)), cu_q, cu_k, seqlen_q, seqlen_k,
                                         q_descale=descales[0], k_descale=descales[1], v_descale=descales[2],
                                         backend="reference")
        else:
            fa3nn.flash_attn_func(q8, k8, v8, None, False, None, *descales, backend="reference")
    args, kwargs = seen["args"], seen["kwargs"]
    assert len(args) == 15 and args[-1] == torch.bfloat16 and args[12:14] == (seqlen_q, seqlen_k)
    if varlen:
        assert torch.equal(args[10], cu_q) and torch.equal(args[11], cu_k)
        assert kwargs["varlen_deal"] in ("dynamic", "static") and kwargs["vt_starts"] is not None
    else:
        assert args[10] is None and args[11] is None and "varlen_deal" not in kwargs and kwargs["vt_starts"] is None
