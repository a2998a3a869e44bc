"""One test per bad input: each raises before any kernel runs, naming the argument and expected vs actual."""

import math

import numpy as np
import pytest
import torch

import fa3nn


def qkv(batch=2, seqlen_q=8, seqlen_k=8, nheads=4, nheads_kv=2, headdim=16, dtype=torch.float32):
    return (torch.randn(batch, seqlen_q, nheads, headdim, dtype=dtype),
            torch.randn(batch, seqlen_k, nheads_kv, headdim, dtype=dtype),
            torch.randn(batch, seqlen_k, nheads_kv, headdim, dtype=dtype))


def packed(cu_q=(0, 3, 8), cu_k=(0, 4, 8), max_q=5, max_k=4):
    q, k, v = torch.randn(cu_q[-1], 4, 16), torch.randn(cu_k[-1], 2, 16), torch.randn(cu_k[-1], 2, 16)
    return q, k, v, torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32), max_q, max_k


def dense_call(**kwargs):
    def call():
        q, k, v = kwargs.pop("tensors", None) or qkv()
        return fa3nn.flash_attn_func(q, k, v, **kwargs)
    return call


def varlen_call(args, **kwargs):
    return lambda: fa3nn.flash_attn_varlen_func(*args, **kwargs)


q, k, v = qkv()
CASES = {
    "q rank": (dense_call(tensors=(q[0], k, v)), ValueError, r"q must have 4 dimensions"),
    "batch mismatch": (dense_call(tensors=(q, k[:1], v[:1])), ValueError, r"batch must match: q has 2, k has 1"),
    "headdim mismatch": (dense_call(tensors=(q, k[..., :8], v)), ValueError, r"headdim of k must equal"),
    "k/v mismatch": (dense_call(tensors=(q, k, v[:, :4])), ValueError, r"k and v must match"),
    # k with 2 heads and v with 1: unchecked, the reference backend broadcast v's one head over k's two and answered
    # wrong without a word (the seqlen mismatch above cannot tell whether heads are compared)
    "k/v heads mismatch": (dense_call(tensors=(q, k, v[:, :, :1])), ValueError,
                           r"k and v must match in every dimension but headdim: k \(2, 8, 2, 16\), v \(2, 8, 1, 16\)"),
    "varlen k/v heads mismatch": (varlen_call((*packed()[:2], packed()[2][:, :1], *packed()[3:])), ValueError,
                                  r"k and v must match .* k \(8, 2, 16\), v \(8, 1, 16\)"),
    "heads not divisible": (dense_call(tensors=qkv(nheads=5, nheads_kv=2)), ValueError, r"multiple of nheads of k/v"),
    "no k/v heads": (dense_call(tensors=qkv(nheads_kv=0)), ValueError,
                     r"nheads of k/v must be positive, got k \(2, 8, 0, 16\)"),
    "integer dtype": (dense_call(tensors=(q.long(), k, v)), TypeError, r"q must be a floating tensor"),
    "mixed dtypes": (dense_call(tensors=(q.half(), k, v)), TypeError, r"one dtype, got q torch.float16"),
    "not a tensor": (dense_call(tensors=(q.tolist(), k, v)), TypeError, r"q must be a torch.Tensor"),
    "last dim strided": (dense_call(tensors=(q.transpose(1, 3), k.transpose(1, 3), v.transpose(1, 3))),
                         ValueError, r"contiguous in its last dimension"),
    "window below -1": (dense_call(window_size=(-2, 0)), ValueError, r"window_size entries must be >= -1"),
    "window not a pair": (dense_call(window_size=(4,)), TypeError, r"window_size must be a pair"),
    "softcap negative": (dense_call(softcap=-1.0), ValueError, r"softcap must be >= 0"),
    "softcap nan": (dense_call(softcap=math.nan), TypeError, r"softcap must be a finite float"),
    "softcap below float32's normals": (dense_call(softcap=1e-39), ValueError,
                                        r"softcap must be 0 or at least 1.175e-38 \(float32's smallest normal\)"),
    "scale inf": (dense_call(softmax_scale=math.inf), ValueError, r"softmax_scale must be finite"),
    "scale nan": (dense_call(softmax_scale=math.nan), ValueError, r"softmax_scale must be finite"),
    "causal not bool": (dense_call(causal=1), TypeError, r"causal must be a bool"),
    "fp8 recipe name": (dense_call(fp8="e4m3"), ValueError, r"unknown FP8 recipe name 'e4m3'; choose one of"),
    "fp8 recipe type": (dense_call(fp8=3), TypeError, r"fp8 must be None, True, False, a recipe name .* got int 3"),
    "fp8 not a recipe": (dense_call(fp8=object()), TypeError, r"fp8=<object .*> is no FP8 recipe: cannot convert"),
    "fp8 delayed without a module": (dense_call(fp8="delayed"), ValueError, r"needs state .*fa3nn.FlashAttentionV3"),
    "fp8 forced backend off its GPU": (dense_call(fp8="per_tile", backend="hopper"), fa3nn.UnsupportedCall,
                                       r"backend='hopper' cannot run this FP8 forward call: needs a Hopper GPU"),
    "fp8 forced backend refusing the call": (
        dense_call(fp8="per_tile", backend="triton"), fa3nn.UnsupportedCall,
        r"backend='triton' cannot run this FP8 forward call: CPU tensors run only under Triton's interpreter.*"
        r"Backends that can: \['reference'\]"),
    "unknown backend": (dense_call(backend="cudnn"), ValueError, r"backend must be one of"),
    "forced unavailable backend": (dense_call(backend="triton"), fa3nn.UnsupportedCall,
                                   r"backend='triton' cannot run this forward call: .*can: \['reference'\]"),
    "cu_seqlens dtype": (lambda: fa3nn.flash_attn_varlen_func(*packed()[:3], packed()[3].long(), packed()[4], 5, 4),
                         TypeError, r"cu_seqlens_q must have dtype torch.int32, got torch.int64"),
    # the kernels read cu_seqlens as consecutive int32s: a strided view (every other entry of a longer tensor here)
    # ran the Triton forward on the wrong boundaries (the interpreter crashed; a GPU reads past them), as
    # FlashAttention-3's CHECK_CONTIGUOUS refuses it
    "cu_seqlens strided": (lambda: fa3nn.flash_attn_varlen_func(
        *packed()[:3], torch.tensor([0, 9, 3, 9, 8, 9], dtype=torch.int32)[::2], packed()[4], 5, 4),
        ValueError, r"cu_seqlens_q must be contiguous \(stride 1\), got stride 2; call cu_seqlens_q.contiguous\(\)"),
    "cu_seqlens 2-D": (lambda: fa3nn.flash_attn_varlen_func(*packed()[:3], packed()[3][None], packed()[4], 5, 4),
                       ValueError, r"cu_seqlens_q must be 1-D"),
    # (cu_seqlens may start after row 0 or end before the last row, as FlashAttention-3's: tests/test_row_spans.py)
    "cu_seqlens before row 0": (lambda: fa3nn.flash_attn_varlen_func(
        *packed()[:3], torch.tensor([-1, 3, 8], dtype=torch.int32), packed()[4], 5, 4),
        ValueError, r"cu_seqlens_q\[0\] must be >= 0 \(the first sequence's first row\), got -1"),
    "cu_seqlens decreasing": (varlen_call(packed(cu_k=(0, 6, 4, 8), cu_q=(0, 3, 5, 8))), ValueError,
                              r"cu_seqlens_k must be non-decreasing"),
    "cu_seqlens total": (lambda: fa3nn.flash_attn_varlen_func(
        *packed()[:3], torch.tensor([0, 3, 9], dtype=torch.int32), packed()[4], 6, 4),
        ValueError, r"cu_seqlens_q\[-1\] \(9\) is past the packed tensor's 8 rows: it must be <= 8"),
    "cu_seqlens batch mismatch": (varlen_call(packed(cu_k=(0, 8))), ValueError, r"both have batch \+ 1 entries"),
    "max_seqlen too small": (varlen_call(packed(max_q=4)), ValueError,
                             r"max_seqlen_q \(4\) is smaller than the longest sequence \(5\)"),
    "max_seqlen negative": (varlen_call(packed(max_k=-1)), ValueError, r"max_seqlen_k must be a non-negative int"),
    "varlen q rank": (lambda: fa3nn.flash_attn_varlen_func(q, *packed()[1:]), ValueError, r"q must have 3 dimensions"),
    # The public-API audit of 2026-12-05: each of these was accepted, crashed deep in torch, or named no argument.
    "window past int32": (dense_call(window_size=(-1, 2**31)), ValueError,  # wrapped around in int64 masks: zeros
                          r"window_size entries must be at most 2147483647 \(int32\); use -1"),
    "window far past int64": (dense_call(causal=True, window_size=(2**70, -1)), ValueError, r"at most 2147483647"),
    "scale int past float": (dense_call(softmax_scale=10**400), ValueError, r"softmax_scale must be finite"),
    "softcap int past float": (dense_call(softcap=10**400), TypeError, r"softcap must be a finite float"),
    "scale past float32": (dense_call(softmax_scale=1e39), ValueError,  # NaN / inf outputs before
                           r"softmax_scale must be at most 3.403e\+38 in magnitude \(float32's largest finite value\), "
                           r"got 1e\+39"),
    "negative scale past float32": (dense_call(softmax_scale=-3.5e38), ValueError, r"softmax_scale must be at most"),
    "softcap past float32": (dense_call(softcap=1e300), ValueError, r"softcap must be at most 3.403e\+38"),
    "softcap too large for the scale": (dense_call(softcap=1e35), ValueError,  # 0.25 / 1e35 flushes to 0 in float32
                                        r"softcap 1e\+35 is so large against softmax_scale 0.25 .* pass softcap=0"),
    "causal numpy bool": (dense_call(causal=np.True_), TypeError,
                          r"causal must be a bool \(True or False\), got numpy\.bool"),
    "deterministic string": (dense_call(deterministic="yes"), TypeError, r"deterministic must be a bool"),
    "return_lse string": (dense_call(return_lse="no"), TypeError,  # "no" is truthy: (out, lse) came back
                          r"return_lse must be a bool \(True or False\), got str 'no'"),
    "varlen return_lse": (varlen_call(packed(), return_lse=1), TypeError, r"return_lse must be a bool"),
    "varlen without cu_seqlens": (lambda: fa3nn.flash_attn_varlen_func(*packed()[:3], None, None, 5, 4), TypeError,
                                  r"flash_attn_varlen_func needs cu_seqlens_q and cu_seqlens_k .* got cu_seqlens_q "
                                  r"NoneType, cu_seqlens_k NoneType. For a dense batch call flash_attn_func"),
    # FlashAttention-3's semantics: a side without cu_seqlens is dense slots (fa3nn.slots)
    "varlen one cu_seqlens": (lambda: fa3nn.flash_attn_varlen_func(*packed()[:3], packed()[3], None, 5, 4), ValueError,
                              r"k must have 4 dimensions .* cu_seqlens_k is None, so k is dense \(pass cu_seqlens_k "
                              r"for a packed k\), got 3"),
    # a learnable temperature or cap (a 0-d tensor that requires grad) was read as its number: no gradient, silently
    "learnable softmax_scale": (dense_call(softmax_scale=torch.tensor(0.3, requires_grad=True)), TypeError,
                                r"softmax_scale is a tensor that requires grad; .* no gradient: pass "
                                r"float\(softmax_scale\) .* multiply q by it and pass softmax_scale=1.0"),
    "learnable softcap": (dense_call(softcap=torch.nn.Parameter(torch.tensor(2.0))), TypeError,
                          r"softcap is a tensor that requires grad"),
    "module learnable scale": (lambda: fa3nn.FlashAttentionV3(softmax_scale=torch.nn.Parameter(torch.tensor(0.3))),
                               TypeError, r"softmax_scale is a tensor that requires grad"),
    # nested tensors (SDPA takes them) passed every check and failed in the backend with ATen's text, naming nothing.
    # Made inside the call: making a jagged one imports triton, which at collection time would come before
    # test_triton_interpreter.py sets TRITON_INTERPRET (CI failed so)
    "nested jagged q": (lambda: fa3nn.flash_attn_func(
        torch.nested.nested_tensor([q[0], q[1, :5]], layout=torch.jagged), k, v), TypeError,
        r"q is a nested tensor; fa3nn takes dense ones: .* flash_attn_varlen_func's packed rows, q.values\(\) .* "
        r"cu_seqlens q.offsets\(\).int\(\)"),
    "nested k": (dense_call(tensors=(q, torch.nested.nested_tensor([k[0], k[1]]), v)), TypeError,
                 r"k is a nested tensor"),
    # a sparse q was told to call .contiguous(), which raises for sparse layouts
    "sparse q": (dense_call(tensors=(q.to_sparse(), k, v)), TypeError,
                 r"q must be a dense \(strided\) tensor, got layout torch.sparse_coo; call q.to_dense\(\) first"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_clear_error(case):
    call, error, message = CASES[case]
    with pytest.raises(error, match=message):
        call()


@pytest.mark.gpu
def test_tensors_on_different_devices():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"one device"):
        fa3nn.flash_attn_func(q.cuda(), k, v)


def test_tensors_on_different_devices_meta():
    """Without a GPU, the meta device stands in for "another device"."""
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"q, k and v must be on one device, got q cpu, k meta"):
        fa3nn.flash_attn_func(q, k.to("meta"), v)


def test_module_rejects_bad_config_at_construction():
    with pytest.raises(ValueError, match=r"window_size entries must be >= -1"):
        fa3nn.FlashAttentionV3(window_size=(-3, 0))
    with pytest.raises(ValueError, match=r"backend must be one of"):
        fa3nn.FlashAttentionV3(backend="flash")


def test_module_checks_softcap_against_its_scale_at_construction():
    """softcap=1e30 with softmax_scale=1e-10 constructed, and then every forward raised."""
    with pytest.raises(ValueError, match=r"softcap 1e\+30 is so large against softmax_scale 1e-10 .* pass softcap=0"):
        fa3nn.FlashAttentionV3(softcap=1e30, softmax_scale=1e-10)
    with pytest.raises(ValueError, match=r"softcap 1e-30 is too small for softmax_scale 10000000000.0: their quotient"):
        fa3nn.FlashAttentionV3(softcap=1e-30, softmax_scale=1e10)
    fa3nn.FlashAttentionV3(softcap=1e30)  # no scale given: the forward checks against 1 / sqrt(headdim)


def test_module_partial_varlen_arguments():
    attn = fa3nn.FlashAttentionV3()
    q, k, v, cu_q, cu_k, max_q, max_k = packed()
    with pytest.raises(ValueError, match=r"needs all of cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k"):
        attn(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)


def test_cu_seqlens_checked_again_after_in_place_change():
    """Validation is cached per tensor; an in-place edit bumps the version counter, so it is checked again."""
    q, k, v, cu_q, cu_k, max_q, max_k = packed()
    fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)
    cu_q[1] = 6  # now the second sequence has 2 tokens and the first 6 > max_seqlen_q
    with pytest.raises(ValueError, match=r"max_seqlen_q \(5\) is smaller than the longest sequence \(6\)"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)
    cu_q[1] = 9
    with pytest.raises(ValueError, match=r"cu_seqlens_q must be non-decreasing"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, 9)


def test_module_dense_call_with_max_seqlen():
    """max_seqlen without cu_seqlens describes no packed call: it was ignored without a word."""
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"max_seqlen_q / max_seqlen_k \(3, 3\) describe a packed \(varlen\) call"):
        fa3nn.FlashAttentionV3()(q, k, v, max_seqlen_q=3, max_seqlen_k=3)


@pytest.mark.parametrize("layer_idx, error", [("a", TypeError), (None, TypeError), (1.5, TypeError),
                                              (True, TypeError), (-1, ValueError)])
def test_module_layer_idx(layer_idx, error):
    with pytest.raises(error, match=r"layer_idx must be an int >= 0"):
        fa3nn.FlashAttentionV3(layer_idx=layer_idx, fp8="per_tile")


def test_explain_checks_what_the_call_checks():
    """explain answers for the call flash_attn_func / flash_attn_varlen_func would run, so it refuses what they
    refuse: it used to explain a dense call when only cu_seqlens_k was given, and pass bad cu_seqlens values. (It
    takes DelayedScaling, which only a FlashAttentionV3 can run: it answers for such a layer.)"""
    q, k, v = qkv()
    assert fa3nn.explain(q, k, v, fp8=fa3nn.DelayedScaling()).forward == "fp8 emulation (reference)"
    pq, pk, pv, cu_q, cu_k, max_q, max_k = packed()
    with pytest.raises(ValueError, match=r"k must have 3 dimensions"):  # dense q is a dense side; k is not packed
        fa3nn.explain(q, k, v, None, cu_k, max_q, max_k)
    with pytest.raises(ValueError, match=r"max_seqlen_q \(4\) is smaller than the longest sequence \(5\)"):
        fa3nn.explain(pq, pk, pv, cu_q, cu_k, 4, max_k)
    with pytest.raises(ValueError, match=r"cu_seqlens_k\[-1\] \(9\) is past the packed tensor's 8 rows"):
        fa3nn.explain(pq, pk, pv, cu_q, torch.tensor([0, 4, 9], dtype=torch.int32), max_q, 5)
    # rows outside every sequence are a call the functions take (fa3nn.spans), so explain answers for it
    assert fa3nn.explain(pq, pk, pv, cu_q, torch.tensor([1, 4, 7], dtype=torch.int32), max_q, max_k).forward \
        == "reference"
    assert fa3nn.explain(pq, pk, pv, cu_q, cu_k, max_q, max_k).forward == "reference"


def test_window_at_int32_max_is_unbounded():
    """The largest accepted window side is a plain window wider than any sequence: the same output as -1."""
    q, k, v = qkv()
    for causal in (False, True):
        wide = fa3nn.flash_attn_func(q, k, v, causal=causal, window_size=(2**31 - 1, 2**31 - 1))
        torch.testing.assert_close(wide, fa3nn.flash_attn_func(q, k, v, causal=causal))


def test_size_one_last_dim_with_any_stride():
    """A last dimension of size 1 reads one element whatever its stride, and torch calls such a tensor contiguous
    (so the error's `.contiguous()` advice could not help): it is accepted and gives the contiguous copy's output."""
    q, k, v = qkv(headdim=1)
    odd = [t.as_strided(t.shape, (*t.stride()[:3], 5)) for t in (q, k, v)]
    assert all(t.stride(-1) == 5 and t.is_contiguous() for t in odd)
    torch.testing.assert_close(fa3nn.flash_attn_func(*odd), fa3nn.flash_attn_func(q, k, v), rtol=0, atol=0)


def test_max_seqlen_takes_any_integral_number():
    """max_seqlen_q = np.int64(5) (a length read from a numpy array) or a 0-d integer tensor is the int 5: it used
    to raise ValueError. A non-integer is a TypeError naming the argument."""
    q, k, v, cu_q, cu_k, max_q, max_k = packed()
    want = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)
    for integral in (np.int64(max_q), np.int32(max_q), torch.tensor(max_q)):
        got = fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, integral, np.int64(max_k))
        assert torch.equal(got, want)
        assert torch.equal(fa3nn.FlashAttentionV3()(q, k, v, cu_q, cu_k, integral, max_k), want)
        assert fa3nn.explain(q, k, v, cu_q, cu_k, integral, max_k).forward == "reference"
    for bad in (5.0, np.float32(5), torch.tensor(5.0), torch.tensor([5]), "5", True):
        with pytest.raises(TypeError, match=r"max_seqlen_q must be an int .* pass an int"):
            fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, bad, max_k)
    with pytest.raises(ValueError, match=r"max_seqlen_q \(4\) is smaller than the longest sequence \(5\)"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, np.int64(4), max_k)
    with pytest.raises(ValueError, match=r"max_seqlen_k must be a non-negative int, got -1"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, np.int64(-1))


@pytest.mark.parametrize("dense_side", ["q", "k"])
def test_explain_takes_a_dense_side_as_the_call_does(dense_side):
    """flash_attn_varlen_func takes a side whose cu_seqlens is None as dense (batch, seqlen, ...) (fa3nn.slots);
    explain refused packed q with dense k / v ("k must have 3 dimensions"), a call that runs."""
    pq, pk, pv, cu_q, cu_k, max_q, max_k = packed(cu_q=(0, 3, 8), cu_k=(0, 4, 8))
    dq, dk, dv = qkv(seqlen_q=4, seqlen_k=4)
    args = (pq, dk, dv, cu_q, None, max_q, None) if dense_side == "k" else (dq, pk, pv, None, cu_k, None, max_k)
    out = fa3nn.flash_attn_varlen_func(*args)
    assert out.shape == args[0].shape
    found = fa3nn.explain(*args)
    assert (found.forward, found.backward) == ("reference", "reference")
    with pytest.raises(ValueError, match=r"q's and k's sequences must match in number"):  # as the call refuses
        bad = (pq, dk[:1], dv[:1], cu_q, None, max_q, None) if dense_side == "k" else (
            dq[:1], pk, pv, None, cu_k, None, max_k)
        fa3nn.explain(*bad)


def test_explain_takes_the_calls_keywords(monkeypatch):
    """explain took neither seqused, qv, attention_chunk, sinks, descales nor the hints, so a call's keywords could
    not be handed over (a TypeError; s57's probe). It takes them now and answers for the call the backends see:
    [q, qv] against [k, v] (head dim d + dv), chunks and slots as a packed call; sinks and hints change nothing."""
    from fa3nn import interface

    seen = []
    monkeypatch.setattr(interface, "explain_call", lambda backend, call, **kw: seen.append(call) or "answer")
    q, k, v = qkv(headdim=16)
    qv = torch.randn(*q.shape[:-1], 16)
    sinks = torch.randn(q.shape[2])
    hints = dict(num_splits=2, pack_gqa=True, sm_margin=4, return_attn_probs=True, return_lse=True)
    assert fa3nn.explain(q, k, v, causal=True, qv=qv, sinks=sinks, **hints) == "answer"
    assert (seen[-1].headdim, seen[-1].headdim_v, seen[-1].varlen) == (32, 16, False)
    fa3nn.explain(q, k, v, causal=True, attention_chunk=4)
    assert seen[-1].varlen and seen[-1].headdim == 16
    pq, pk, pv, cu_q, cu_k, max_q, max_k = packed()
    fa3nn.explain(pq, pk, pv, cu_q, cu_k, max_q, max_k, seqused_q=torch.tensor([2, 5], dtype=torch.int32),
                  seqused_k=torch.tensor([4, 1], dtype=torch.int32))
    assert seen[-1].varlen
    # and refuses what the call refuses, by the call's messages
    for kwargs, error, pattern in (
            (dict(qv=qv[..., :8]), ValueError, r"qv must have q's shape with v's headdim"),
            (dict(sinks=sinks[:2]), ValueError, r"sinks"),
            (dict(attention_chunk=-1), ValueError, r"attention_chunk"),
            (dict(pack_gqa="yes"), TypeError, r"pack_gqa must be a bool")):
        with pytest.raises(error, match=pattern):
            fa3nn.explain(q, k, v, **kwargs)
        with pytest.raises(error, match=pattern):  # (the call itself)
            fa3nn.flash_attn_func(q, k, v, **kwargs)
    with pytest.raises(TypeError, match=r"explain\(\) got unexpected keyword arguments \['window'\]"):
        fa3nn.explain(q, k, v, window=3)
    with pytest.raises(ValueError, match=r"an fp8 recipe needs cu_seqlens covering every packed row"):
        fa3nn.explain(pq, pk, pv, torch.tensor([1, 3, 8], dtype=torch.int32), cu_k, max_q, max_k, fp8="per_tile")


def test_cu_seqlens_and_seqused_edited_through_numpy_are_read_again():
    """torch.from_numpy shares memory: a write through the array leaves the tensor's version counter alone, so the
    per-tensor memo served the old boundaries (the review's probe: 2.4 off a fresh tensor's) and accepted a decreasing
    cu_seqlens. CPU tensors are read at every call."""
    q, k, v = (torch.randn(16, 2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    buf = np.array([0, 8, 16], dtype=np.int32)
    cu = torch.from_numpy(buf)
    fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8)
    buf[1] = 4
    version = cu._version
    stale_or_not = fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 12, 12)
    assert cu._version == version  # the edit was invisible to torch
    torch.testing.assert_close(stale_or_not, fa3nn.flash_attn_varlen_func(q, k, v, cu.clone(), cu.clone(), 12, 12),
                               atol=0, rtol=0)
    buf[1] = 20
    with pytest.raises(ValueError, match=r"cu_seqlens_q must be non-decreasing, but cu_seqlens_q\[2\] = 16 < 20"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 16, 16)
    used = np.array([8, 8], dtype=np.int32)
    seqused = torch.from_numpy(used)
    buf[1] = 8
    fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, seqused_k=seqused)
    used[0] = 3
    torch.testing.assert_close(fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, seqused_k=seqused),
                               fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, seqused_k=seqused.clone()),
                               atol=0, rtol=0)
    used[0] = 9
    with pytest.raises(ValueError, match=r"seqused_k\[0\] = 9 must be in \[0, 8\]"):
        fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, seqused_k=seqused)
