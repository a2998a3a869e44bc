"""The native Hopper forward (kernels/hopper/, fa3nn/backends/hopper.py).

CPU: the refusal reasons. GPU (`pytest -m gpu` on an H200): the error-ratio rule against attention_ref for bf16/fp16,
head dims 64/128/256, causal and not, MHA/GQA/MQA, odd and unequal lengths, varlen; outputs NaN-poisoned before
each call; bitwise determinism; CUDA-graph capture; the backward through the API on hopper (MHA/GQA/MQA, a
gradient into lse) and, where the native backward refuses, on another backend.
"""

from __future__ import annotations

import ctypes

import pytest
import torch

import fa3nn
from fa3nn.backends import hopper_build
from fa3nn.backends.base import AttnCall
from fa3nn.backends.hopper import SOFTCAP_HEADDIMS, HopperBackend, launch
from fa3nn.checks import WINDOW_MAX
from fa3nn.masks import Window
from fa3nn.testing import assert_error_ratio, attention_ref, random_padding_mask, random_qkv, unpad

DTYPES = [torch.bfloat16, torch.float16]
HEADDIMS = [64, 128, 256]
SEQLENS = [
    (1, 1), (17, 113), (113, 203), (239, 1), (128, 128), (1024, 1024), (511, 1537), (4224, 4224), (8192, 8192),
]
HEADS = {"mha": (4, 4), "gqa": (6, 2), "mqa": (4, 1)}


def _call(**overrides) -> AttnCall:
    fields = dict(
        device_type="cuda", capability=(9, 0), dtype=torch.bfloat16, headdim=128, headdim_v=128, nheads=8,
        nheads_kv=8, varlen=False, window=Window(), softcap=0.0, deterministic=False,
    )
    fields.update(overrides)
    return AttnCall(**fields)


@pytest.mark.parametrize(
    "overrides, backward, expected",
    [
        ({"headdim": 96, "headdim_v": 96}, True, "headdim 96/96 is not supported"),
        ({"headdim": 256, "headdim_v": 256, "deterministic": True}, True, "deterministic=True"),
        ({"deterministic": True}, True, "deterministic=True"),
        ({"device_type": "cpu", "capability": None}, False, "needs a CUDA device"),
        ({"capability": (8, 0)}, False, "needs a Hopper GPU (sm_90), got sm_80"),
        ({"dtype": torch.float32}, False, "dtype torch.float32 is not supported"),
        ({"headdim": 96, "headdim_v": 96}, False, "headdim 96/96 is not supported"),
        ({"softcap": 30.0, "headdim": 64, "headdim_v": 64}, False, "softcap at head dim 64: the Triton forward is"),
        ({"headdim": 128, "headdim_v": 64}, False, "headdim 128/64 is not supported"),
        ({"headdim": 192, "headdim_v": 192}, False, "headdim 192/192 is not supported"),
        ({"headdim": 192, "headdim_v": 128, "window": Window(64, 0)}, False,
         "headdim 192/128 with window (64, 0): the native forward has no sliding-window or softcap kernels there"),
        ({"headdim": 192, "headdim_v": 128, "softcap": 30.0}, False,
         "headdim 192/128 with softcap=30.0: the native forward has no sliding-window"),
        ({"headdim": 192, "headdim_v": 128, "window": Window(64, 0)}, True,
         "headdim 192/128 with window (64, 0): the native backward has no sliding-window or softcap kernels there"),
        ({"headdim": 192, "headdim_v": 128, "deterministic": True}, True, "deterministic=True"),
    ],
)
def test_refusal_reasons(overrides, backward, expected):
    reason = HopperBackend().refusal(_call(**overrides), backward)
    assert reason is not None and expected in reason


def test_windows_are_not_refused(monkeypatch):
    """Sliding windows: the native forward and backward take dense and varlen calls."""
    from fa3nn.backends import hopper_lib

    monkeypatch.setattr(hopper_lib.LIBRARY, "get", lambda: object())  # a synthetic call: no GPU, no build
    for window in (Window(64, 0), Window(-1, 5), Window(0, 0), Window(30, 40)):
        assert HopperBackend().refusal(_call(window=window), False) is None
        assert HopperBackend().refusal(_call(window=window, varlen=True), False) is None
        assert HopperBackend().refusal(_call(window=window), True) is None
        assert HopperBackend().refusal(_call(window=window, varlen=True), True) is None


def test_mla_forward_is_not_refused(monkeypatch):
    """Multi-head latent attention (q/k 192, v 128): the native forward and backward take dense and varlen, causal
    and not, MHA and GQA calls."""
    from fa3nn.backends import hopper_lib

    monkeypatch.setattr(hopper_lib.LIBRARY, "get", lambda: object())  # a synthetic call: no GPU, no build
    for window, varlen, nheads_kv in ((Window(), False, 8), (Window(-1, 0), True, 2), (Window(-1, 0), False, 1)):
        call = _call(headdim=192, headdim_v=128, window=window, varlen=varlen, nheads_kv=nheads_kv)
        assert HopperBackend().refusal(call, False) is None
        assert HopperBackend().refusal(call, True) is None


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit) to build the library")
def test_c_abi_checks_head_dims_before_touching_the_gpu():
    """fa3nn_hopper_fwd's own refusals through the ctypes binding (so also where headdim_v lands, after headdim):
    unsupported pairs, and at 192 / 128 windows, softcap and the variants it is not built for; every one returns
    before a tensor map or launch (no GPU needed); and a negative max_ctas (after variant)."""
    lib = hopper_build.load(hopper_build.library_path())
    strides = (ctypes.c_int64 * 12)(*([8] * 12))

    def error(headdim, headdim_v, window=(-1, -1), softcap=0.0, bf16=1, variant=0, nheads_kv=2, max_ctas=0):
        status = lib.fa3nn_hopper_fwd(*([None] * 7), 2, 100, 120, 100, 8, nheads_kv, headdim, headdim_v, strides, 0.1,
                                      0, *window, softcap, None, bf16, variant, max_ctas, None, None)
        return status, lib.fa3nn_hopper_last_error().decode()

    unsupported = "unsupported head dims (built: q / k and v equal 64, 128 or 256, or q / k 192 with v 128)"
    for headdim, headdim_v in ((96, 96), (128, 64), (192, 192), (128, 192)):
        assert error(headdim, headdim_v) == (1, unsupported)
    assert error(128, 128, nheads_kv=3) == (1, "nheads must be a multiple of nheads_kv")
    no_masks = "head dims 192 / 128 are built without sliding windows and softcap"
    assert error(192, 128, window=(64, 0)) == (1, no_masks)
    assert error(192, 128, softcap=30.0) == (1, no_masks)
    assert error(192, 128, variant=1) == (
        1, "head dims 192 / 128 are built for variants full, tiles_a, tiles_b, int_max and float_max")
    assert error(192, 128, bf16=0, variant=4) == (1, "experimental tile variants exist for bf16 only")
    assert error(128, 128, max_ctas=-1) == (1, "max_ctas must be 0 (one CTA per SM) or positive")


def test_mla_forward_names_a_window_or_softcap():
    """At 192 / 128 the forward's launch names window_size / softcap before loading the library (no GPU needed)."""
    q, k, v = random_qkv(1, 8, 8, 2, 2, 192, torch.bfloat16, headdim_v=128)
    with pytest.raises(ValueError, match=r"window_size=\(64, 0\) at head dims 192 / 128: the native forward has no "
                                         "sliding-window or softcap kernels there; use backend='triton'"):
        launch(q, k, v, 0.1, False, window_size=(64, 0))
    with pytest.raises(ValueError, match="softcap=30.0 at head dims 192 / 128: the native forward"):
        launch(q, k, v, 0.1, True, softcap=30.0)


def test_softcap_is_not_refused_by_the_backward(monkeypatch):
    """Softcap: the native backward takes it at every head dim (hopper.SOFTCAP_BWD_HEADDIMS), dense and varlen, with
    and without a window; the forward at SOFTCAP_HEADDIMS only."""
    from fa3nn.backends import hopper_lib

    monkeypatch.setattr(hopper_lib.LIBRARY, "get", lambda: object())  # a synthetic call: no GPU, no build
    for headdim in (64, 128, 256):
        for window, varlen in ((Window(), False), (Window(-1, 0), True), (Window(4096, 0), False)):
            call = _call(softcap=50.0, headdim=headdim, headdim_v=headdim, window=window, varlen=varlen)
            assert HopperBackend().refusal(call, True) is None
            assert (HopperBackend().refusal(call, False) is None) == (headdim in SOFTCAP_HEADDIMS)


def test_window_and_softcap_arguments_of_the_forward():
    """window_size and softcap are checked before anything runs (no GPU needed); both take the default variant
    only."""
    # Bad sizes and caps raise what the API raises for them (fa3nn.checks: check_window_size, check_softcap).
    pair = r"window_size must be a pair of ints"
    for bad, error, message in (((-2, 0), ValueError, r"window_size entries must be >= -1"),
                                ((1.5, 0), TypeError, pair), ((3,), TypeError, pair), (None, TypeError, pair)):
        with pytest.raises(error, match=message):
            launch(None, None, None, 0.1, False, window_size=bad)
    with pytest.raises(ValueError, match="the sliding-window forward is built for variant 'full' only"):
        launch(None, None, None, 0.1, False, variant="tiles_a", window_size=(32, 0))
    for bad, error, message in ((-1.0, ValueError, r"softcap must be >= 0"),
                                *((b, TypeError, r"softcap must be a finite float") for b in
                                  (float("inf"), float("nan"), "30", True))):
        with pytest.raises(error, match=message):
            launch(None, None, None, 0.1, False, softcap=bad)
    with pytest.raises(ValueError, match="the softcap forward is built for variant 'full' only"):
        launch(None, None, None, 0.1, False, variant="no_pingpong", softcap=30.0)
    # The kernels take softmax_scale / softcap as float32: a quotient that overflows is refused, not made inf.
    with pytest.raises(ValueError, match=r"softcap 1e-30 is too small for softmax_scale 1e\+20: their quotient "
                                         r"overflows float32"):
        launch(None, None, None, 1e20, False, softcap=1e-30)


def _hopper_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


needs_hopper = pytest.mark.skipif(not _hopper_ready(), reason="needs an sm_90 (Hopper) GPU")


def _poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def _check(q, k, v, causal, out, lse, query_padding_mask=None, key_padding_mask=None, window_size=(-1, -1),
           softcap=0.0):
    out_ref, lse_ref = attention_ref(q, k, v, query_padding_mask, key_padding_mask, causal=causal,
                                     window_size=window_size, softcap=softcap)
    out_pt, _ = attention_ref(q, k, v, query_padding_mask, key_padding_mask, causal=causal, upcast=False,
                              reorder_ops=True, window_size=window_size, softcap=softcap)
    assert_error_ratio(out, out_ref, out_pt, "out")
    return lse_ref


@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_forward_matches_reference(dtype, headdim, causal, seqlens, heads):
    seqlen_q, seqlen_k = seqlens
    nheads, nheads_kv = HEADS[heads]
    batch = 1 if seqlen_q * seqlen_k > 1 << 22 else 2
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device="cuda")
    _launch_and_check(q, k, v, causal)


def _launch_and_check(q, k, v, causal, variant="full", window_size=(-1, -1), softcap=0.0):
    """The kernel (`variant`) into NaN-poisoned out and lse, then both against the reference; returns (out, lse)."""
    batch, seqlen_q, nheads, headdim = q.shape
    out = _poisoned((*q.shape[:-1], v.shape[-1]), q.dtype)
    lse = _poisoned((batch, nheads, seqlen_q), torch.float32)
    launch(q, k, v, headdim**-0.5, causal, variant=variant, out=out, lse=lse, window_size=window_size,
           softcap=softcap)
    lse_ref = _check(q, k, v, causal, out, lse, window_size=window_size, softcap=softcap)
    finite = torch.isfinite(lse_ref)
    assert torch.equal(finite, torch.isfinite(lse)), "lse is -inf exactly where no key is attended"
    torch.testing.assert_close(lse[finite], lse_ref[finite], atol=1e-3, rtol=1e-4)
    return out, lse


# The forward keeps a stale row maximum until a new score exceeds it by more than 8 log2 units (Problem::rescale_log2;
# variant eager_rescale moves it on every rise). Scores that climb along the keys (visited last-first, so the climb
# plays out over the whole row) by ~2-4 log2 units per key block, then a sink key far above everything, make rows
# take both branches: stale maxima kept over several blocks (probabilities > 1) and moved ones.
@pytest.mark.parametrize("variant", ["full", "eager_rescale"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_rising_row_maxima(dtype, headdim, causal, variant):
    batch, seqlen_q, seqlen_k = 2, 1000, 1500
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, 6, 2, headdim, dtype, device="cuda")
    q[..., 0] = 4.0
    k[..., 0] = torch.linspace(60.0, 0.0, seqlen_k, device="cuda").view(1, seqlen_k, 1).to(dtype)
    k[:, 7, :, 0] = 200.0
    _launch_and_check(q, k, v, causal, variant)


# d128's default takes each row's max from integer maxes over positive scores (OnlineSoftmax kIntMax, softmax.cuh)
# and hands a warp whose rows include one without a positive score to the float tree. Half the query heads see only
# negative scores (q = -|x|, k = |y|), the rest mixed ones, so warps take either path; int_max / float_max force the
# integer / float form at every head dim.
@pytest.mark.parametrize("variant", ["full", "int_max", "float_max"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_rows_without_a_positive_score(headdim, causal, variant):
    q, k, v = random_qkv(2, 1000, 1500, 4, 2, headdim, torch.bfloat16, device="cuda")
    k = k.abs()
    q[:, :, :2] = -q[:, :, :2].abs()
    _launch_and_check(q, k, v, causal, variant)


# d128 non-causal calls take one of two tile shapes by max_seqlen_q (kernels/hopper/flash_fwd_launch.cuh,
# ShortCallSeqlen): 128 x 128 up to 1024, 128 x 160 with Q double-buffered past it. SEQLENS has no dense pair just
# past 1024, and the varlen test's lengths stay under 700.
@pytest.mark.parametrize("seqlens", [(1025, 1500), (1999, 333), (2048, 2048)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("heads", ["mha", "gqa"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_d128_non_causal_mid_length_tiles(dtype, heads, seqlens):
    test_forward_matches_reference(dtype, 128, False, seqlens, heads)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_d128_non_causal_mid_length_tiles_varlen(dtype):
    _varlen_case(dtype, 128, False, 1800)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_varlen_matches_reference(dtype, headdim, causal):
    _varlen_case(dtype, headdim, causal, 700)


# Sliding windows (FwdConfig::kLocal), NaN-poisoned: windows bounded on the left, the right, both, down to the
# diagonal alone, and causal with a left bound. 511x1537 and 1537x511 put the bottom-right diagonal off the tile grid
# (1537x511: query rows that see no key, lse -inf and zero output), 4224x4224 walks many key blocks with both bounds
# inside tiles and some tiles whose first key block is not 0; GQA reads K/V by head group.
WINDOWS = [((100, -1), False), ((-1, 70), False), ((64, 64), False), ((0, 0), False), ((200, -1), True),
           ((1000, 0), False)]


@pytest.mark.parametrize("seqlens", [(511, 1537), (1537, 511), (1000, 1000), (4224, 4224)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"w{w[0][0]}_{w[0][1]}{'_causal' if w[1] else ''}")
@pytest.mark.parametrize("heads", ["mha", "gqa"])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_window_forward_matches_reference(dtype, headdim, heads, window, seqlens):
    (window_size, causal), (nheads, nheads_kv) = window, HEADS[heads]
    q, k, v = random_qkv(1 if seqlens[0] > 2000 else 2, *seqlens, nheads, nheads_kv, headdim, dtype, device="cuda")
    _launch_and_check(q, k, v, causal, window_size=window_size)


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"w{w[0][0]}_{w[0][1]}{'_causal' if w[1] else ''}")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_window_varlen_matches_reference(headdim, window):
    (window_size, causal) = window
    _varlen_case(torch.bfloat16, headdim, causal, 700, window_size)


# Window sides up to fa3nn.checks.WINDOW_MAX: the kernels add them to row and column indices in int32, so the launcher
# bounds them by the sequence lengths first (Window.kernel_sides; unbounded, the Triton kernels' sums wrapped: out off
# by 0.87, lse -inf). Same mask as the bounded window; 511x1537 and 1537x511 put the diagonal off the tile grid.
WIDE_WINDOWS = [(WINDOW_MAX, WINDOW_MAX), (WINDOW_MAX, 0), (0, WINDOW_MAX), (-1, WINDOW_MAX - 60)]


@pytest.mark.parametrize("seqlens", [(511, 1537), (1537, 511)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("window_size", WIDE_WINDOWS, ids=lambda w: f"w{w[0]}_{w[1]}")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_windows_up_to_int32_max_forward(headdim, window_size, seqlens):
    q, k, v = random_qkv(2, *seqlens, 6, 2, headdim, torch.bfloat16, device="cuda")
    _launch_and_check(q, k, v, False, window_size=window_size)


def _mask_id(mask) -> str:
    """A (causal, window_size) case's test id."""
    causal, (left, right) = mask
    return f"{'causal' if causal else 'full'}_w{left}_{right}"


# Softcap (FwdConfig::kSoftcap, cap 30): q scaled by 4 so that scores * softmax_scale spread over about +-12 and the
# tanh bends them; full, causal, a window and a causal window; 1537x511 has query rows that see no key (causal).
SOFTCAP_MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (100, 30)), (True, (300, -1))]


@pytest.mark.parametrize("seqlens", [(511, 1537), (1000, 1000), (1537, 511)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("mask", SOFTCAP_MASKS, ids=_mask_id)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_softcap_forward_matches_reference(dtype, headdim, mask, seqlens):
    causal, window_size = mask
    q, k, v = random_qkv(2, *seqlens, 6, 2, headdim, dtype, device="cuda")
    _launch_and_check(q * 4, k, v, causal, window_size=window_size, softcap=30.0)


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("headdim", [64, 128, 256])
def test_auto_trains_softcap_on_hopper(headdim):
    """Softcap (and a window, as Gemma 2's local layers) through flash_attn_func under auto: the native forward (the
    Triton one at head dim 64: as fast there, hopper.SOFTCAP_HEADDIMS), the native backward on its out and lse, with a
    gradient into lse too; against the reference."""
    q, k, v = random_qkv(2, 700, 900, 6, 2, headdim, torch.bfloat16, device="cuda")
    q = q * 4
    for window_size in ((-1, -1), (256, 0)):
        kwargs = dict(window_size=window_size, softcap=30.0)
        explanation = fa3nn.explain(q, k, v, causal=True, **kwargs)
        forward = "hopper" if headdim in SOFTCAP_HEADDIMS else "triton"
        assert explanation.forward == forward and explanation.backward == "hopper", explanation
        dout, dlse = torch.randn_like(q), torch.randn(2, 6, 700, device="cuda")
        got = _api_gradients(q, k, v, dout, dlse, True, **kwargs)
        ref = _api_gradients(q, k, v, dout, dlse, True, reference=True, upcast=True, **kwargs)
        pt = _api_gradients(q, k, v, dout, dlse, True, reference=True, upcast=False, **kwargs)
        for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
            assert_error_ratio(g, r, p, f"{name} (d{headdim}, window {window_size})")


def _varlen_case(dtype, headdim, causal, max_seqlen, window_size=(-1, -1), headdim_v=None):
    batch, nheads, nheads_kv = 5, 6, 2
    q, k, v = random_qkv(batch, max_seqlen, max_seqlen, nheads, nheads_kv, headdim, dtype, device="cuda",
                         headdim_v=headdim_v)
    mask_q = random_padding_mask(batch, max_seqlen, device="cuda")
    mask_k = random_padding_mask(batch, max_seqlen, device="cuda")
    q_packed, cu_q, max_q = unpad(q, mask_q)
    k_packed, cu_k, max_k = unpad(k, mask_k)
    v_packed, _, _ = unpad(v, mask_k)
    out = fa3nn.flash_attn_varlen_func(q_packed, k_packed, v_packed, cu_q, cu_k, max_q, max_k, causal=causal,
                                       window_size=window_size, return_lse=True, backend="hopper")
    out_packed, lse_packed = out
    out_full = q.new_zeros(*q.shape[:-1], v.shape[-1])
    out_full[mask_q] = out_packed
    lse_ref = _check(q, k, v, causal, out_full, None, mask_q, mask_k, window_size=window_size)
    lse_ref_packed = lse_ref.transpose(1, 2)[mask_q].transpose(0, 1)  # (nheads, total_q)
    finite = torch.isfinite(lse_ref_packed)
    assert torch.equal(finite, torch.isfinite(lse_packed))
    torch.testing.assert_close(lse_packed[finite], lse_ref_packed[finite], atol=1e-3, rtol=1e-4)


# The varlen forward's two deals (hopper.VARLEN_DEALS): the dynamic one (default) hands tiles to CTAs as they finish,
# the static one in a fixed order; each tile is computed the same way on whichever CTA, so out and lse must agree
# bitwise, NaN-poisoned first. Lengths mixed (one sequence empty, queries past keys under causal: tiles whose rows
# attend no key, published without a Q load) and more tiles than SMs, so most are taken from the counter; also a
# window, and a call with far fewer tiles than SMs.
@pytest.mark.parametrize("case", ["mixed", "mixed_causal", "window", "few_tiles"])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_varlen_deals_agree(headdim, case):
    from fa3nn.backends.base import Varlen

    lengths_q, lengths_k = [1900, 0, 300, 1024, 77, 2048, 640], [1800, 0, 450, 1024, 60, 2048, 700]
    if case == "few_tiles":
        lengths_q, lengths_k = [100, 130], [90, 200]
    causal, window_size = case == "mixed_causal", (300, 20) if case == "window" else (-1, -1)
    starts_q, starts_k = ([0] + torch.tensor(ls).cumsum(0).tolist() for ls in (lengths_q, lengths_k))
    cu_q, cu_k = (torch.tensor(st, dtype=torch.int32, device="cuda") for st in (starts_q, starts_k))
    varlen = Varlen(cu_q, cu_k, max(lengths_q), max(lengths_k), tuple(starts_q), tuple(starts_k))
    q = torch.randn(starts_q[-1], 8, headdim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(starts_k[-1], 2, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    results = {}
    for deal in ("dynamic", "static"):
        out = _poisoned((*q.shape[:-1], headdim), q.dtype)
        lse = _poisoned((8, starts_q[-1]), torch.float32)
        results[deal] = launch(q, k, v, headdim**-0.5, causal, varlen, out=out, lse=lse, window_size=window_size,
                               varlen_deal=deal)
    (out_d, lse_d), (out_s, lse_s) = results["dynamic"], results["static"]
    assert not out_d.isnan().any() and not lse_d.isnan().any(), "a row the dynamic deal never wrote"
    assert torch.equal(out_d, out_s) and torch.equal(lse_d, lse_s)
    if causal:  # the 77 queries over 60 keys: the first 17 rows attend nothing (tiles without key blocks)
        row0 = starts_q[4]
        assert not out_d[row0:row0 + 17].any() and torch.isinf(lse_d[:, row0:row0 + 17]).all()


def test_varlen_deal_is_checked():
    with pytest.raises(ValueError, match="varlen_deal must be one of"):
        launch(*(torch.zeros(1, 8, 2, 64) for _ in range(3)), 0.125, False, varlen_deal="greedy")


def test_auto_deals_varlen_dynamically_but_at_one_length():
    """hopper.varlen_deal_for: auto deals a varlen call dynamically unless every sequence has one query and one key
    length (there the static deal measured 1.02-1.13x the dynamic one causal, s46b); dense calls have no deal."""
    from fa3nn.backends.base import Varlen
    from fa3nn.backends.hopper import varlen_deal_for

    def packed(starts_q, starts_k):
        cu_q, cu_k = torch.tensor(starts_q), torch.tensor(starts_k)
        return Varlen(cu_q, cu_k, 0, 0, tuple(starts_q), tuple(starts_k))

    one_length, mixed = packed((0, 512, 1024), (0, 512, 1024)), packed((0, 300, 1024), (0, 300, 1024))
    assert varlen_deal_for(one_length, "auto") == "static" and varlen_deal_for(mixed, "auto") == "dynamic"
    assert varlen_deal_for(packed((0, 512, 1024), (0, 600, 1200)), "auto") == "static"  # one length per side
    assert varlen_deal_for(packed((0, 512, 1024), (0, 512, 1000)), "auto") == "dynamic"
    assert varlen_deal_for(one_length, "dynamic") == "dynamic" and varlen_deal_for(mixed, "static") == "static"
    assert varlen_deal_for(None, "auto") is None


# Multi-head latent attention in its training form (DeepSeek: q / k 192 = 128 + 64 rotary, v 128;
# kernels/hopper/flash_fwd_d192.cu): every shape and head layout of the equal-dims tests, the tile and row-max
# variants, varlen, sinks, and training through auto (both directions native; the backward's own tests are
# test_hopper_bwd.py's test_mla_*).
MLA = (192, 128)


@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_mla_forward_matches_reference(dtype, causal, seqlens, heads):
    seqlen_q, seqlen_k = seqlens
    batch = 1 if seqlen_q * seqlen_k > 1 << 22 else 2
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, *HEADS[heads], MLA[0], dtype, device="cuda", headdim_v=MLA[1])
    _launch_and_check(q, k, v, causal)


@pytest.mark.parametrize("seqlens", [(1000, 1000), (511, 1537), (1537, 511), (4224, 4224)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant", ["tiles_a", "tiles_b", "int_max", "float_max"])
@pytest.mark.gpu
@needs_hopper
def test_mla_variants(variant, causal, seqlens):
    q, k, v = random_qkv(2, *seqlens, 6, 2, MLA[0], torch.bfloat16, device="cuda", headdim_v=MLA[1])
    _launch_and_check(q, k, v, causal, variant=variant)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_mla_varlen(dtype, causal):
    _varlen_case(dtype, MLA[0], causal, 700, headdim_v=MLA[1])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_mla_sinks(causal):
    q, k, v = random_qkv(2, 1537, 511, 6, 2, MLA[0], torch.bfloat16, device="cuda", headdim_v=MLA[1])
    _sinks_against_plain(q, k, v, causal, _sinks(6))


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.gpu
@needs_hopper
def test_mla_trains_through_auto(varlen):
    """auto: the forward and the backward on the native kernels; gradients by the error-ratio rule against the
    reference's."""
    q, k, v = random_qkv(2, 1000, 1000, 6, 2, MLA[0], torch.bfloat16, device="cuda", headdim_v=MLA[1],
                         requires_grad=True)
    dout = torch.randn(2, 1000, 6, MLA[1], device="cuda", dtype=torch.bfloat16)
    explained = str(fa3nn.explain(q, k, v, causal=True))
    assert "forward: hopper" in explained and "backward: hopper" in explained, explained
    if varlen:
        mask = random_padding_mask(2, 1000, device="cuda")
        (qp, cu, max_len), (kp, _, _), (vp, _, _) = (unpad(t, mask) for t in (q, k, v))
        out = fa3nn.flash_attn_varlen_func(qp, kp, vp, cu, cu, max_len, max_len, causal=True)
        grads = torch.autograd.grad(out, (q, k, v), dout[mask])
    else:
        mask = None
        grads = torch.autograd.grad(fa3nn.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)
    refs = []
    for upcast in (True, False):
        out_ref, _ = attention_ref(q, k, v, mask, mask, causal=True, upcast=upcast, reorder_ops=not upcast)
        out_ref = out_ref if mask is None else out_ref * mask[:, :, None, None]
        refs.append(torch.autograd.grad(out_ref, (q, k, v), dout))
    for name, got, ref, pt in zip("qkv", grads, *refs):
        assert_error_ratio(got, ref, pt, f"d{name}")


# Attention sinks in the forward's epilogue (FwdParams::sinks, OnlineSoftmax::finalize): the kernel with sinks against
# the same kernel without them corrected in Python (fa3nn.sinks.apply_sinks: one more rounding of out, so within a
# unit of bf16 / fp16), and against the reference with the sinks applied (the error-ratio rule). The sinks per head:
# ordinary ones, one that dominates every row (+30: out ~ 0, lse ~ the sink; the epilogue's sum is taken against
# max(row max, sink)), one far below (-30) and -inf (no sink); 1537x511 causal has query rows that see no key (out 0,
# lse = the sink); gpt-oss's window (128, 0); varlen.
SINKS_MASKS = [(False, (-1, -1)), (True, (-1, -1)), (True, (128, -1)), (False, (100, 30))]


def _sinks(nheads: int) -> torch.Tensor:
    sinks = torch.randn(nheads, device="cuda") * 2
    sinks[:3] = torch.tensor([30.0, -30.0, float("-inf")])
    return sinks


def _with_sinks_reference(q, k, v, causal, window_size, sinks, query_padding_mask=None, key_padding_mask=None):
    from fa3nn.sinks import apply_sinks

    refs = []  # float32 inputs (the reference, out in float32), then the inputs' dtype not upcast (the yardstick)
    for upcast in (True, False):
        inputs = [t.float() for t in (q, k, v)] if upcast else (q, k, v)
        out, lse = attention_ref(*inputs, query_padding_mask, key_padding_mask, causal=causal,
                                 window_size=window_size, upcast=upcast, reorder_ops=not upcast)
        refs.append(apply_sinks(out, lse.float(), sinks))
    return refs


def _sinks_against_plain(q, k, v, causal, sinks, window_size=(-1, -1)):
    """The kernel with sinks into NaN-poisoned out and lse against the same kernel without them corrected in Python
    (fa3nn.sinks.apply_sinks: within a unit of bf16 / fp16); returns the kernel's (out, lse)."""
    from fa3nn.sinks import apply_sinks

    batch, seqlen_q, nheads, headdim = q.shape
    out = _poisoned((batch, seqlen_q, nheads, v.shape[-1]), q.dtype)
    lse = _poisoned((batch, nheads, seqlen_q), torch.float32)
    launch(q, k, v, headdim**-0.5, causal, out=out, lse=lse, window_size=window_size, sinks=sinks)
    out_py, lse_py = apply_sinks(*launch(q, k, v, headdim**-0.5, causal, window_size=window_size), sinks)
    unit = 2.0 ** -7 if q.dtype == torch.bfloat16 else 2.0 ** -10
    torch.testing.assert_close(out, out_py, atol=1e-5, rtol=unit)
    torch.testing.assert_close(lse, lse_py, atol=2e-5, rtol=1e-6)
    return out, lse


@pytest.mark.parametrize("seqlens", [(1000, 1000), (1537, 511), (4224, 4224)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("mask", SINKS_MASKS, ids=_mask_id)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_sinks_in_the_kernel(dtype, headdim, mask, seqlens):
    causal, window_size = mask
    q, k, v = random_qkv(1 if seqlens[0] > 2000 else 2, *seqlens, 6, 2, headdim, dtype, device="cuda")
    sinks = _sinks(6)
    out, lse = _sinks_against_plain(q, k, v, causal, sinks, window_size)
    (out_ref, lse_ref), (out_pt, _) = _with_sinks_reference(q, k, v, causal, window_size, sinks)
    assert_error_ratio(out, out_ref, out_pt, "out")
    torch.testing.assert_close(lse, lse_ref, atol=1e-3, rtol=1e-4)
    if seqlens == (1537, 511) and causal:  # the first 1026 rows see no key
        assert torch.equal(out[:, :1026], torch.zeros_like(out[:, :1026]))
        assert torch.equal(lse[:, :, :1026], sinks[None, :, None].expand(lse.shape[0], 6, 1026))


@pytest.mark.parametrize("mask", SINKS_MASKS[:3], ids=_mask_id)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_sinks_in_the_kernel_varlen(headdim, mask):
    causal, window_size = mask
    batch, nheads, nheads_kv, max_seqlen = 5, 6, 2, 700
    q, k, v = random_qkv(batch, max_seqlen, max_seqlen, nheads, nheads_kv, headdim, torch.bfloat16, device="cuda")
    mask_q = random_padding_mask(batch, max_seqlen, device="cuda")
    mask_k = random_padding_mask(batch, max_seqlen, device="cuda")
    (q_packed, cu_q, max_q), (k_packed, cu_k, max_k) = unpad(q, mask_q), unpad(k, mask_k)
    sinks = _sinks(nheads)
    out_packed, lse_packed = fa3nn.flash_attn_varlen_func(
        q_packed, k_packed, unpad(v, mask_k)[0], cu_q, cu_k, max_q, max_k, causal=causal, window_size=window_size,
        return_lse=True, sinks=sinks, backend="hopper")
    out = torch.zeros_like(q)
    out[mask_q] = out_packed
    (out_ref, lse_ref), (out_pt, _) = _with_sinks_reference(q, k, v, causal, window_size, sinks, mask_q, mask_k)
    assert_error_ratio(out, out_ref, out_pt, "out")
    torch.testing.assert_close(lse_packed, lse_ref.transpose(1, 2)[mask_q].transpose(0, 1), atol=1e-3, rtol=1e-4)


# The sinks' gradient of the native backward, from its preprocess's rowsum(dout * out) and lse
# (fa3nn.sinks.sinks_gradient_of_delta; the workspaces' rows no kernel writes, varlen's gaps between sequences, filled
# to count 0),
# against fa3nn.sinks.sinks_gradient's pass over dout and out on the same tensors, with a gradient into lse; dense and
# varlen (three sequences, one without keys), MHA and GQA, causal with gpt-oss's window and not.
@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("mask", SINKS_MASKS[:3], ids=_mask_id)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_sinks_gradient_of_the_native_backward(headdim, mask, varlen):
    from fa3nn.backends import hopper_bwd
    from fa3nn.backends.base import AttnParams, Varlen
    from fa3nn.sinks import sinks_gradient

    causal, window_size = mask
    window = Window.from_args(causal, window_size)
    params = AttnParams(headdim**-0.5, window, 0.0, False)
    sinks = _sinks(6)
    sinks[2] = 0.7  # (-inf: no gradient to compare)
    if varlen:
        starts_q, starts_k = (0, 300, 301, 900), (0, 500, 500, 1100)  # the second sequence: a query, no key
        q, k, v = random_qkv(1, 900, 1100, 6, 2, headdim, torch.bfloat16, device="cuda")
        q, k, v = q[0], k[0], v[0]
        cu_q, cu_k = (torch.tensor(s, dtype=torch.int32, device="cuda") for s in (starts_q, starts_k))
        lengths = Varlen(cu_q, cu_k, 600, 600, starts_q, starts_k)
        out, lse = launch(q, k, v, params.softmax_scale, causal, lengths, window_size=window_size, sinks=sinks)
    else:
        q, k, v = random_qkv(2, 1000, 1000, 6, 2, headdim, torch.bfloat16, device="cuda")
        lengths = None
        out, lse = launch(q, k, v, params.softmax_scale, causal, window_size=window_size, sinks=sinks)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    *grads, dsinks = hopper_bwd.backward(dout, q, k, v, out, lse, dlse, params, lengths, sinks)
    plain = hopper_bwd.backward(dout, q, k, v, out, lse, dlse, params, lengths)
    for g, p in zip(grads, plain):  # the sinks change nothing else (dQ's fp32 atomics may sum in another order)
        assert (g.float() - p.float()).abs().max() <= 1e-2 * p.float().abs().max()
    # in float32 products, as the preprocess forms them (sinks_gradient's bf16 products differ by up to 3% causal:
    # the first rows, few keys, weigh most)
    expected = sinks_gradient(dout.float(), out.float(), lse, dlse, sinks)
    torch.testing.assert_close(dsinks, expected, rtol=1e-4, atol=1e-3)
    assert expected.abs().max() > 1.0  # a gradient worth comparing


# The default causal deal (one-(batch, head) sections dealt boustrophedon), forward variant 7 (the deal before
# 2026-12-01: L2-sized sections, round-robin) and variant 12 (one section over every tile) differ only in which CTA
# computes which tile, so their outputs must be equal bit for bit; all NaN-poisoned first. The shapes are ones where
# the deals differ (flash_fwd_launch.cuh, use_one_pair_sections: d64 <= 4096, d128 <= 8192, d256 <= 4096) with more
# tiles than SMs, a partial last round and an odd tile count (GQA 6 / 2 heads).
@pytest.mark.parametrize("headdim, batch, seqlen", [(64, 4, 1500), (128, 3, 1000), (128, 1, 4224), (256, 2, 2048),
                                                    (256, 5, 300)])
@pytest.mark.gpu
@needs_hopper
def test_causal_deals_agree_bitwise(headdim, batch, seqlen):
    q, k, v = random_qkv(batch, seqlen, seqlen, 6, 2, headdim, torch.bfloat16, device="cuda")
    outs = [_launch_and_check(q, k, v, True, variant) for variant in ("full", "l2_sections", "one_section")]
    for out, lse in outs[1:]:
        assert torch.equal(outs[0][0], out) and torch.equal(outs[0][1], lse)


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
def test_deterministic_and_graph_capturable(causal):
    q, k, v = random_qkv(2, 1000, 1500, 8, 2, 128, torch.bfloat16, device="cuda")
    first = fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper")
    second = fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper")
    assert torch.equal(first, second)
    static = torch.empty_like(first)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        static.copy_(fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper"))  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static.copy_(fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper"))
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static, fa3nn.flash_attn_func(q, k, v, causal=causal, backend="hopper"))


def _api_gradients(q, k, v, dout, dlse, causal, **kwargs):
    """dq, dk, dv of <out, dout> + <lse, dlse> through fa3nn.flash_attn_func (kwargs) or attention_ref."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    if kwargs.get("reference"):
        out, lse = attention_ref(*leaves, causal=causal, upcast=kwargs["upcast"], reorder_ops=not kwargs["upcast"],
                                 window_size=kwargs.get("window_size", (-1, -1)), softcap=kwargs.get("softcap", 0.0))
    else:
        out, lse = fa3nn.flash_attn_func(*leaves, causal=causal, return_lse=True, **kwargs)
    ((out.float() * dout.float()).sum() + (lse.float() * dlse).sum()).backward()
    return [t.grad for t in leaves]


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("window_size", [(-1, -1), (100, 30)], ids=lambda w: f"w{w[0]}_{w[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", [64, 128, 256])
def test_auto_trains_varlen_on_hopper(headdim, causal, window_size):
    """flash_attn_varlen_func with a gradient into lse too, served forward and backward by the native kernels, against
    the padded batch's reference (random lengths, empty sequences allowed, GQA); also with a sliding window per
    sequence (100, 30), or (100, 0) with causal."""
    batch, max_seqlen, nheads, nheads_kv = 5, 600, 6, 2
    q, k, v = random_qkv(batch, max_seqlen, max_seqlen, nheads, nheads_kv, headdim, torch.bfloat16, device="cuda")
    mask_q = random_padding_mask(batch, max_seqlen, device="cuda")
    mask_k = random_padding_mask(batch, max_seqlen, device="cuda")
    (q_p, cu_q, max_q), (k_p, cu_k, max_k), (v_p, _, _) = unpad(q, mask_q), unpad(k, mask_k), unpad(v, mask_k)
    explanation = fa3nn.explain(q_p, k_p, v_p, cu_q, cu_k, max_q, max_k, causal=causal, window_size=window_size)
    assert (explanation.forward, explanation.backward) == ("hopper", "hopper"), explanation
    dout = torch.randn_like(q_p)
    dlse = torch.randn(nheads, q_p.shape[0], device="cuda")
    leaves = [t.detach().clone().requires_grad_() for t in (q_p, k_p, v_p)]
    out, lse = fa3nn.flash_attn_varlen_func(*leaves, cu_q, cu_k, max_q, max_k, causal=causal, window_size=window_size,
                                            return_lse=True)
    finite = torch.isfinite(lse)  # rows that attend no key (causal, or no keys): lse -inf, no gradient through it
    ((out.float() * dout.float()).sum() + (lse[finite] * dlse[finite]).sum()).backward()
    got = [t.grad for t in leaves]

    def reference(upcast):
        padded = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o, lse_ref = attention_ref(*padded, mask_q, mask_k, causal=causal, upcast=upcast, reorder_ops=not upcast,
                                   window_size=window_size)
        l_packed = lse_ref.transpose(1, 2)[mask_q].t()  # (nheads, total_q), the layout of lse
        ((o[mask_q].float() * dout.float()).sum() + (l_packed[finite] * dlse[finite]).sum()).backward()
        return [t.grad[m] for t, m in zip(padded, (mask_q, mask_k, mask_k))]

    for name, g, r, p in zip(("dq", "dk", "dv"), got, reference(True), reference(False)):
        assert_error_ratio(g, r, p, f"{name} (varlen d{headdim})")


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("heads", ["mha", "gqa", "mqa"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", [64, 128])
def test_auto_runs_forward_and_backward_on_hopper(headdim, causal, heads):
    """Through the API with a gradient into lse too (dlse enters the preprocess's delta); GQA/MQA via the backend's
    K/V expansion and group sum."""
    nheads, nheads_kv = HEADS[heads]
    q, k, v = random_qkv(2, 300, 451, nheads, nheads_kv, headdim, torch.bfloat16, device="cuda")
    explanation = fa3nn.explain(q, k, v, causal=causal)
    assert (explanation.forward, explanation.backward) == ("hopper", "hopper"), explanation
    dout = torch.randn_like(q)
    dlse = torch.randn(2, nheads, 300, device="cuda")
    got = _api_gradients(q, k, v, dout, dlse, causal)
    ref = _api_gradients(q, k, v, dout, dlse, causal, reference=True, upcast=True)
    pt = _api_gradients(q, k, v, dout, dlse, causal, reference=True, upcast=False)
    for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
        assert_error_ratio(g, r, p, name)


@pytest.mark.gpu
@needs_hopper
def test_backward_the_native_kernel_refuses_runs_elsewhere():
    """deterministic=True (the native dQ uses atomics) trains through another backend at every head dim; head dim 256
    without it trains on the native backward (since 2026-12-04; before, on triton)."""
    for headdim, deterministic, backward in ((128, True, "triton"), (256, True, "triton"), (256, False, "hopper")):
        q, k, v = random_qkv(2, 200, 200, 4, 4, headdim, torch.bfloat16, device="cuda")
        explanation = fa3nn.explain(q, k, v, causal=True, deterministic=deterministic)
        assert explanation.forward == "hopper" and explanation.backward == backward, explanation
        dout, dlse = torch.randn_like(q), torch.zeros(2, 4, 200, device="cuda")
        got = _api_gradients(q, k, v, dout, dlse, True, deterministic=deterministic)
        ref = _api_gradients(q, k, v, dout, dlse, True, reference=True, upcast=True)
        pt = _api_gradients(q, k, v, dout, dlse, True, reference=True, upcast=False)
        for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
            assert_error_ratio(g, r, p, f"{name} (d{headdim})")


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("headdim", [64, 128, 256])
def test_auto_trains_sliding_windows_on_hopper(headdim):
    """A sliding-window call through flash_attn_func under auto: the native forward and backward, with a gradient
    into lse too; against the reference."""
    q, k, v = random_qkv(2, 700, 900, 6, 2, headdim, torch.bfloat16, device="cuda")
    explanation = fa3nn.explain(q, k, v, causal=True, window_size=(128, 0))
    assert explanation.forward == "hopper" and explanation.backward == "hopper", explanation
    dout, dlse = torch.randn_like(q), torch.randn(2, 6, 700, device="cuda")
    got = _api_gradients(q, k, v, dout, dlse, True, window_size=(128, 0))
    ref = _api_gradients(q, k, v, dout, dlse, True, window_size=(128, 0), reference=True, upcast=True)
    pt = _api_gradients(q, k, v, dout, dlse, True, window_size=(128, 0), reference=True, upcast=False)
    for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
        assert_error_ratio(g, r, p, f"{name} (d{headdim})")


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
def test_strided_inputs_and_unusual_scales(causal):
    """(b, h, s, d) tensors viewed as (b, s, h, d) go to TMA without a copy; a zero or negative softmax scale (legal,
    degenerate) must still give the reference's answer."""
    q, k, v = (torch.randn(2, 4, 300, 128, device="cuda").to(torch.bfloat16).transpose(1, 2) for _ in range(3))
    assert q.shape == (2, 300, 4, 128) and not q.is_contiguous()  # (b, s, h, d) views with head stride s * d
    for scale in (0.3, 0.0, -0.2):
        out = fa3nn.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal, backend="hopper")
        out_ref, _ = attention_ref(q, k, v, causal=causal, softmax_scale=scale)
        out_pt, _ = attention_ref(q, k, v, causal=causal, softmax_scale=scale, upcast=False, reorder_ops=True)
        assert_error_ratio(out, out_ref, out_pt, f"out (scale {scale})")


def test_native_softcap_needs_a_positive_scale():
    """The kernels pick their tanh on max |s| * softmax_scale / cap, a bound on |s * softmax_scale / cap| only for a
    positive scale (HopperBackend sends other scales to the reference); direct launches are refused before any
    library load, so this runs on the CPU."""
    from fa3nn.backends import hopper_bwd

    q = k = v = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    for scale in (-0.125, 0.0):
        with pytest.raises(ValueError, match=r"the native softcap kernels need softmax_scale > 0"):
            launch(q, k, v, scale, True, softcap=30.0)
        with pytest.raises(ValueError, match=r"softmax_scale must be positive"):  # the backward's, for any call
            hopper_bwd.launch(q, q, k, v, q, torch.zeros(1, 2, 8), scale, True, softcap=30.0)
