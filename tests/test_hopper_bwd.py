"""The native Hopper backward (kernels/hopper/flash_bwd*.cu, fa3nn/backends/hopper_bwd.py), HopperBackend's backward.

CPU: argument checks (each wrong argument is named) and the refusals of the Backend.backward entry point.
GPU (`pytest -m gpu` on an H200): dq/dk/dv against the reference backward by the error-ratio rule (fp32 reference vs
the same math in the input dtype), bf16/fp16, head dims 64/128, causal and not, the sequence lengths of
test_hopper.py (odd, unequal, one-key, longer queries than keys); gradients NaN-poisoned before each call; dK/dV
bitwise deterministic (dQ is summed with fp32 atomics, so its last bits may vary). The bulk-dQ variant (dQ through
shared memory and TMA reduce-adds, hopper_bwd.VARIANTS) by the same rule on fewer shapes, with dK/dV bitwise equal to
the default variant's (it changes only how dQ reaches dq_accum); the overlap variants (next query block's score GEMMs
issued before this block's dQ GEMM, alone and with bulk dQ) the same way. CPU: the schedule models of the bulk-dQ
handoff and of the overlap order (scripts/model_bwd_*.py) pass and catch a wrong protocol.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
import torch

from fa3nn.backends import hopper_bwd
from fa3nn.backends.base import AttnParams, Varlen
from fa3nn.masks import Window
from fa3nn.testing import assert_error_ratio, attention_ref, random_qkv

DTYPES = [torch.bfloat16, torch.float16]
HEADDIMS = [64, 128]
SEQLENS = [
    (1, 1), (17, 113), (113, 203), (239, 1), (128, 128), (1024, 1024), (511, 1537), (4224, 4224), (8192, 8192),
]


def _inputs(batch=2, seqlen_q=100, seqlen_k=120, nheads=4, nheads_kv=4, headdim=128, dtype=torch.bfloat16,
            device="cpu"):
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device=device)
    out = torch.randn_like(q)
    dout = torch.randn_like(q)
    lse = torch.randn(batch, nheads, seqlen_q, dtype=torch.float32, device=device)
    return dict(dout=dout, q=q, k=k, v=v, out=out, lse=lse)


def _with(args, **changes):
    args = dict(args)
    args.update(changes)
    return args


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a: _with(a, q=a["q"].flatten(0, 1)), "q must be 4-d"),
        (lambda a: _with(a, k=a["k"].float()), "k has dtype torch.float32"),
        (lambda a: _with(a, v=a["v"].half()), "v has dtype torch.float16 but q has torch.bfloat16"),
        (lambda a: _with(a, **_inputs(headdim=96)), "q has head dim 96"),
        (lambda a: _with(a, k=a["k"][:, :, :2], v=a["v"][:, :, :2]), "k has 2 heads but q has 4: GQA/MQA"),
        (lambda a: _with(a, v=a["v"][:, :60]), "v has shape (2, 60, 4, 128)"),
        (lambda a: _with(a, out=a["out"][:, :50]), "out has shape (2, 50, 4, 128)"),
        (lambda a: _with(a, dout=a["dout"][:1]), "dout has shape (1, 100, 4, 128)"),
        (lambda a: _with(a, lse=a["lse"].transpose(1, 2)), "lse has shape (2, 100, 4)"),
        (lambda a: _with(a, lse=a["lse"].double()), "lse has shape (2, 4, 100) and dtype torch.float64"),
        (lambda a: _with(a, lse=None), "lse must be a torch.Tensor"),
    ],
)
def test_check_arguments_names_the_bad_argument(change, expected):
    args = change(_inputs())
    with pytest.raises(ValueError) as info:
        hopper_bwd.check_arguments(softmax_scale=0.1, **args)
    assert expected in str(info.value)


def test_check_arguments_accepts_a_valid_call_and_rejects_a_bad_scale():
    args = _inputs(headdim=64, dtype=torch.float16)
    hopper_bwd.check_arguments(softmax_scale=0.125, **args)  # no exception
    with pytest.raises(ValueError, match="softmax_scale must be positive"):
        hopper_bwd.check_arguments(softmax_scale=0.0, **args)


def test_launch_rejects_bad_gradient_buffers_and_cpu_tensors():
    args = _inputs()
    with pytest.raises(ValueError, match="dk must have shape"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, dk=torch.empty_like(args["k"]).float(), **args)
    with pytest.raises(ValueError, match=r"dlse has shape \(2, 4\)"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, dlse=torch.zeros(2, 4), **args)
    with pytest.raises(ValueError, match="needs a CUDA"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, **args)


def test_launch_rejects_an_unknown_variant():
    with pytest.raises(ValueError, match="variant 'tma_dq' is not a backward variant; choose one of red_dq, bulk_dq"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, variant="tma_dq", **_inputs())


def _script(name):
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_bulk_dq_handoff_model_passes_and_catches_a_wrong_protocol(monkeypatch):
    """The named-barrier protocol of the bulk-dQ variant (scripts/model_bwd_dq_handoff.py) under random schedules;
    a writer that frees its buffer even when no later step will wait for it must be caught."""
    model = _script("model_bwd_dq_handoff")
    assert model.main() == 0

    def writer_always_frees(steps):
        for s in range(steps):
            yield ("sync", model.FULL + s % 2)
            yield ("read", s)
            yield ("arrive", model.EMPTY + s % 2)

    monkeypatch.setattr(model, "writer", writer_always_frees)
    assert "partly arrived" in model.run(3, random.Random(0))


def test_overlap_schedule_model_passes():
    """The overlap variants' order (scripts/model_bwd_overlap.py) under random schedules, d64 and d128."""
    assert _script("model_bwd_overlap").main() == 0


@pytest.mark.parametrize("mutation, headdim, expected", [
    (dict(dq_group_at_step0=False), 64, "not complete"),
    (dict(release_before_wait=True), 64, "refilled stage"),
    (dict(release_before_wait=True), 128, "refilled stage"),
    (dict(ds_barrier=False), 128, "dS^T"),
])
def test_overlap_schedule_model_catches_a_wrong_order(mutation, headdim, expected):
    """A program without step 0's (discarded) dQ group, one that releases the ring stage before the dK/dV wait, or
    one without the d128 dS barrier must fail the model."""
    model = _script("model_bwd_overlap")

    def mutated(wg, steps, d):
        return model.consumer_program(wg, steps, d, **mutation)

    rng = random.Random(0)
    errors = [model.run(steps, headdim, rng, mutated) for steps in (1, 3, 5) for _ in range(100)]
    assert any(e is not None and expected in e for e in errors), errors[:3]


def _params(window=None, softcap=0.0):
    return AttnParams(softmax_scale=0.1, window=window or Window(), softcap=softcap, deterministic=False)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(varlen=Varlen(torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32), 1, 1, (0, 1),
                            (0, 1))), "varlen"),
        (dict(params=_params(window=Window(32, 0))), "sliding window"),
        (dict(params=_params(softcap=30.0)), "softcap"),
    ],
)
def test_backward_refuses_what_the_kernel_lacks(kwargs, expected):
    call = dict(dlse=None, params=_params(), varlen=None)
    call.update(kwargs)
    with pytest.raises(ValueError, match=expected):
        hopper_bwd.backward(**_inputs(), **call)


def test_gqa_backward_expands_kv_and_sums_each_group(monkeypatch):
    """The GQA/MQA wrapper around the MHA kernel, on the CPU: `launch` replaced by the exact MHA backward (fp32
    autograd of attention_ref), so what is checked is the wrapper's head mapping (query head h reads K/V head
    h // group) and group sums, against the reference's own GQA backward."""

    def mha_backward(dout, q, k, v, out, lse, softmax_scale, causal, dlse=None):
        assert q.shape[2] == k.shape[2], "the kernel must see MHA"
        leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
        o, _ = attention_ref(*leaves, causal=causal, softmax_scale=softmax_scale)
        o.backward(dout.float())
        return tuple(t.grad.to(q.dtype) for t in leaves)

    monkeypatch.setattr(hopper_bwd, "launch", mha_backward)
    for nheads_kv in (2, 1):
        args = _inputs(nheads=6, nheads_kv=nheads_kv, dtype=torch.float32)
        got = hopper_bwd.backward(**args, dlse=None, params=_params(), varlen=None)
        leaves = [args[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
        out, _ = attention_ref(*leaves, softmax_scale=0.1)
        out.backward(args["dout"])
        for name, g, leaf in zip(("dq", "dk", "dv"), got, leaves):
            assert g.shape == leaf.shape, name
            torch.testing.assert_close(g, leaf.grad, rtol=1e-5, atol=1e-5, msg=f"{name} (nheads_kv {nheads_kv})")


def _hopper_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


needs_hopper = pytest.mark.skipif(not _hopper_ready(), reason="needs an sm_90 (Hopper) GPU")


def _reference_grads(q, k, v, dout, causal, upcast):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, _ = attention_ref(*leaves, causal=causal, upcast=upcast, reorder_ops=not upcast)
    out.backward(dout)
    return [t.grad for t in leaves]


def _poisoned_like(t):
    return torch.full_like(t, float("nan"))


def _check_against_reference(dtype, headdim, causal, seqlens, variant):
    """Runs `variant` on NaN-poisoned gradients, asserts the error-ratio rule per gradient; returns the inputs and
    the gradients for further checks."""
    from fa3nn.backends.hopper import launch as forward

    seqlen_q, seqlen_k = seqlens
    batch, nheads = (1 if seqlen_q * seqlen_k > 1 << 22 else 2), 4
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads, headdim, dtype, device="cuda")
    scale = headdim**-0.5
    out, lse = forward(q, k, v, scale, causal)
    dout = torch.randn_like(out)
    dq, dk, dv = (_poisoned_like(t) for t in (q, k, v))
    hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, dq=dq, dk=dk, dv=dv, variant=variant)
    ref = _reference_grads(q, k, v, dout, causal, upcast=True)
    pt = _reference_grads(q, k, v, dout, causal, upcast=False)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (unwritten rows of the poisoned buffer, or NaN math)"
        assert_error_ratio(got, r, p, name)
    return (dout, q, k, v, out, lse, scale), (dq, dk, dv)


@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_backward_matches_reference(dtype, headdim, causal, seqlens):
    _check_against_reference(dtype, headdim, causal, seqlens, "red_dq")


# The variants change only dQ's path (bulk_dq: shared memory + TMA reduce-add) or the order of neighbouring query
# blocks' GEMMs (overlap), never the order of a sum: dK/dV accumulate the same products in the same order as
# red_dq's, so they must be bitwise equal to its; dQ by the error-ratio rule. Shapes: one query block (1x1: only the
# prologue and, overlap, the after-loop hand-off), a single key (239x1), many ragged steps that reuse both dQ / dS^T
# buffers and (d128, 2 stages) both ring stages (511x1537), and the long case (4224x4224).
VARIANT_SEQLENS = [(1, 1), (239, 1), (511, 1537), (4224, 4224)]


@pytest.mark.parametrize("variant", ["bulk_dq", "overlap", "bulk_dq_overlap"])
@pytest.mark.parametrize("seqlens", VARIANT_SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_variants_match_reference(dtype, headdim, causal, seqlens, variant):
    (dout, q, k, v, out, lse, scale), (_, dk, dv) = _check_against_reference(dtype, headdim, causal, seqlens, variant)
    _, dk_red, dv_red = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, variant="red_dq")
    assert torch.equal(dk, dk_red) and torch.equal(dv, dv_red), f"{variant} changed dK/dV (only dQ's path may differ)"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_backward_dk_dv_deterministic(causal):
    from fa3nn.backends.hopper import launch as forward

    q, k, v = random_qkv(2, 1000, 1500, 8, 8, 128, torch.bfloat16, device="cuda")
    out, lse = forward(q, k, v, 128**-0.5, causal)
    dout = torch.randn_like(out)
    first = hopper_bwd.launch(dout, q, k, v, out, lse, 128**-0.5, causal)
    second = hopper_bwd.launch(dout, q, k, v, out, lse, 128**-0.5, causal)
    assert torch.equal(first[1], second[1]) and torch.equal(first[2], second[2])
    # dQ: fp32 atomics in varying order move its last bits (one bf16 rounding step, or more where a sum cancels to
    # near zero), so only a race-sized difference fails.
    dq_max = first[0].abs().max().item()
    torch.testing.assert_close(first[0], second[0], atol=1e-3 * dq_max, rtol=1e-2)
