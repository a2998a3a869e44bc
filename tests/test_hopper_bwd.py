"""The native Hopper backward (kernels/hopper/flash_bwd*.cu, fa3nn/backends/hopper_bwd.py), HopperBackend's backward.

CPU: argument checks (each wrong argument is named) and the refusals of the Backend.backward entry point.
GPU (`pytest -m gpu` on an H200): dq/dk/dv against the reference backward by the error-ratio rule (fp32 reference vs
the same math in the input dtype), bf16/fp16, head dims 64/128/256, causal and not, the sequence lengths of
test_hopper.py (odd, unequal, one-key, longer queries than keys); gradients NaN-poisoned before each call; dK/dV
bitwise deterministic (dQ is summed with fp32 atomics, so its last bits may vary). The bulk-dQ variant (dQ through
shared memory and TMA reduce-adds, hopper_bwd.VARIANTS) by the same rule on fewer shapes, with dK/dV bitwise equal to
the default variant's (it changes only how dQ reaches dq_accum); the overlap variants (next query block's score GEMMs
issued before this block's dQ GEMM, alone and with bulk dQ) the same way. In-kernel GQA/MQA (one CTA per K/V head
walking its group's query heads): every variant by the same rule, dK/dV bitwise deterministic run to run and equal
across variants. CPU: the schedule models of the bulk-dQ handoff and of the overlap order (scripts/model_bwd_*.py)
pass and catch a wrong protocol; the GQA head checks; `backward`'s choice between the in-kernel and expansion paths.
Varlen (packed sequences): CPU, the argument checks, the workspace layout and the C ABI's varlen checks; GPU, each
sequence against its own dense reference (empty, single-row and unequal sequences, GQA, per-tile and persistent).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import random

import pytest
import torch
from script_module import load_script

from fa3nn.backends import hopper_build, hopper_bwd
from fa3nn.backends.base import AttnCall, AttnParams, Varlen
from fa3nn.checks import WINDOW_MAX
from fa3nn.masks import Window
from fa3nn.testing import assert_error_ratio, attention_ref, random_qkv

DTYPES = [torch.bfloat16, torch.float16]
HEADDIMS = list(hopper_bwd.SUPPORTED_HEADDIMS)
DIMS = list(hopper_bwd.HEADDIM_PAIRS)  # (q / k, v) head dims, multi-head latent attention's 192 / 128 included
MLA = (192, 128)
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
        (lambda a: _with(a, q=a["q"].flatten(0, 1)), "q must be 4-d (batch, seqlen, nheads, headdim)"),
        (lambda a: _with(a, k=a["k"].float()), "k has dtype torch.float32"),
        (lambda a: _with(a, v=a["v"].half()), "v has dtype torch.float16 but q has torch.bfloat16"),
        (lambda a: _with(a, **_inputs(headdim=96)), "q has head dim 96"),
        (lambda a: _with(a, k=a["k"][:, :, :3], v=a["v"][:, :, :3]), "k has 3 heads but q has 4: q's heads must be"),
        (lambda a: _with(a, k=a["k"][:, :, :0], v=a["v"][:, :, :0]), "k has 0 heads but q has 4"),
        (lambda a: _with(a, v=a["v"][:, :, :2]), "v has shape (2, 120, 2, 128); expected (2, 120, 4, 128) (k's shape "
                                                 "with v's head dim)"),
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


def test_mla_head_dims_are_checked():
    """Multi-head latent attention (q / k 192, v 128): accepted with out / dout of v's head dim; other unequal pairs,
    and out shaped like q, are named; windows and softcap are refused there (no such kernels), in launch and in
    refusal; bulk_dq and mla_keys are its variants, mla_keys the default (dense and varlen)."""
    q, k, v = random_qkv(2, 100, 120, 4, 2, 192, torch.bfloat16, headdim_v=128)
    o = torch.randn(2, 100, 4, 128, dtype=torch.bfloat16)
    args = dict(dout=o, q=q, k=k, v=v, out=o.clone(), lse=torch.randn(2, 4, 100))
    hopper_bwd.check_arguments(softmax_scale=0.1, **args)  # no exception
    for change, expected in (
        (dict(v=v[..., :64], out=o[..., :64], dout=o[..., :64]), "q has head dim 192 and v 64; the native backward "
                                                                 "supports 64/64, 128/128, 256/256, 192/128"),
        (dict(out=torch.randn_like(q)), "out has shape (2, 100, 4, 192); expected q's shape with v's head dim "
                                        "(2, 100, 4, 128)"),
        (dict(dout=o[:, :50]), "dout has shape (2, 50, 4, 128)"),
        (dict(v=v[:, :60]), "v has shape (2, 60, 2, 128); expected (2, 120, 2, 128) (k's shape with v's head dim)"),
    ):
        with pytest.raises(ValueError) as info:
            hopper_bwd.check_arguments(softmax_scale=0.1, **_with(args, **change))
        assert expected in str(info.value)
    for masks, named in ((dict(window_size=(64, 0)), r"window_size=\(64, 0\)"), (dict(softcap=30.0), "softcap=30.0")):
        with pytest.raises(ValueError, match=f"{named} at head dims 192 / 128: the native backward has no "
                                             "sliding-window or softcap kernels there; use backend='triton'"):
            hopper_bwd.launch(softmax_scale=0.1, causal=False, **masks, **args)
    # the head dims' refusal comes before the variants' (a window there has no kernel in any variant)
    with pytest.raises(ValueError, match=r"window_size=\(64, 0\) at head dims 192 / 128"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, window_size=(64, 0), variant="red_dq", **args)
    assert hopper_bwd.variants_for(192) == ["bulk_dq", "mla_keys"]
    assert [hopper_bwd.default_variant(d) for d in (64, 128, 192, 256)] == ["m128", "bulk_dq", "mla_keys", "bulk_dq"]
    with pytest.raises(ValueError, match=r"variant 'red_dq' is built for head dim \(64, 128, 256\) only"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, variant="red_dq", **args)
    call = AttnCall(device_type="cuda", capability=(9, 0), dtype=torch.bfloat16, headdim=192, headdim_v=128,
                    nheads=4, nheads_kv=2, varlen=True, window=Window(-1, 0), softcap=0.0, deterministic=False)
    assert hopper_bwd.refusal(call) is None
    assert "with window (64, 0): the native backward has no sliding-window" in hopper_bwd.refusal(
        dataclasses.replace(call, window=Window(64, 0)))
    assert "with softcap=30.0: the native backward has no sliding-window" in hopper_bwd.refusal(
        dataclasses.replace(call, softcap=30.0))
    assert "headdim 192/192" in hopper_bwd.refusal(dataclasses.replace(call, headdim_v=192))


def test_check_arguments_accepts_a_valid_call_and_rejects_a_bad_scale():
    args = _inputs(headdim=64, dtype=torch.float16)
    hopper_bwd.check_arguments(softmax_scale=0.125, **args)  # no exception
    for nheads_kv in (2, 1):  # GQA and MQA: K/V heads dividing q's
        hopper_bwd.check_arguments(softmax_scale=0.125, **_inputs(nheads=4, nheads_kv=nheads_kv))
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


def test_auto_takes_the_dense_rule_for_varlen_of_one_length():
    """fa3nn_hopper_bwd's ctas per schedule (hopper_bwd.launch_ctas): auto passes CTAS_AUTO_UNIFORM (-2, the dense
    call's rule in flash_bwd_launch.cuh auto_persistent_bwd) only for a varlen call whose sequences all have one
    query length and one key length, both positive; mixed lengths, an empty sequence or none keep plain auto (0)."""
    def varlen(starts_q, starts_k):
        return Varlen(torch.tensor(starts_q, dtype=torch.int32), torch.tensor(starts_k, dtype=torch.int32),
                      max(b - a for a, b in zip(starts_q, starts_q[1:])) if len(starts_q) > 1 else 0,
                      max(b - a for a, b in zip(starts_k, starts_k[1:])) if len(starts_k) > 1 else 0,
                      tuple(starts_q), tuple(starts_k))

    launch_ctas = hopper_bwd.launch_ctas
    assert hopper_bwd.CTAS_AUTO_UNIFORM == -2
    assert launch_ctas("auto", None, None, "cpu") == 0
    assert launch_ctas("per_tile", None, varlen([0, 4, 8], [0, 4, 8]), "cpu") == -1
    assert launch_ctas("persistent", 3, varlen([0, 4, 8], [0, 4, 8]), "cpu") == 3
    uniform = ([0, 512, 1024, 1536], [0, 300, 600, 900])  # one query length, one (other) key length
    assert launch_ctas("auto", None, varlen(*uniform), "cpu") == -2
    for starts_q, starts_k in (([0, 512, 1000], [0, 512, 1024]), ([0, 512, 1024], [0, 512, 1000]),
                               ([0, 0, 0], [0, 4, 8]), ([0, 4, 8], [0, 0, 0]), ([0], [0]), ([0, 4, 4], [0, 4, 8])):
        assert launch_ctas("auto", None, varlen(starts_q, starts_k), "cpu") == 0, (starts_q, starts_k)


def test_launch_rejects_an_unknown_variant():
    with pytest.raises(ValueError, match="variant 'tma_dq' is not a backward variant; choose one of red_dq, bulk_dq"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, variant="tma_dq", **_inputs())
    with pytest.raises(ValueError, match="grid_order 'heads' is not a grid order; choose one of auto, key_blocks"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, grid_order="heads", **_inputs())
    with pytest.raises(ValueError, match="schedule 'waves' is not a backward schedule; choose one of auto, per_tile, "
                                         "persistent$"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, schedule="waves", **_inputs())
    for schedule, max_ctas in (("persistent", 0), ("persistent", 2.0), ("persistent", True), ("auto", 4)):
        with pytest.raises(ValueError, match=f"max_ctas must be a positive int and needs schedule='persistent', got "
                                             f"max_ctas={max_ctas!r} with schedule='{schedule}'"):
            hopper_bwd.launch(softmax_scale=0.1, causal=False, schedule=schedule, max_ctas=max_ctas, **_inputs())
    with pytest.raises(ValueError, match=r"variant 'm128' is built for head dim \(64,\) only, q has head dim 128; "
                                         "choose one of red_dq, bulk_dq, overlap, bulk_dq_overlap$"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, variant="m128", **_inputs(headdim=128))
    assert hopper_bwd.variants_for(64) == [v for v in hopper_bwd.VARIANTS if v != "mla_keys"]


@pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit) to build the library")
def test_c_abi_checks_heads_and_grid_order_before_touching_the_gpu():
    """fa3nn_hopper_bwd's own checks, through the ctypes binding (so also the argument order: nheads_kv, grid_order
    and softmax_scale land where the C side reads them). Builds the library like test_hopper_build (no GPU)."""
    lib = hopper_build.load(hopper_build.library_path())
    strides = (ctypes.c_int64 * 24)(*([8] * 24))

    def error(nheads, nheads_kv, grid_order=0, softmax_scale=0.1, ctas=0, cu_q=None, cu_k=None, max_q=100,
              variant=0, headdim=128, window=(-1, -1), softcap=0.0, headdim_v=None, kv_parts=1):
        headdim_v = headdim if headdim_v is None else headdim_v
        status = lib.fa3nn_hopper_bwd(*([None] * 13), cu_q, cu_k, 2, 100, 120, max_q, 120, nheads, nheads_kv, headdim,
                                      headdim_v, strides, softmax_scale, 1, *window, softcap, 1, variant, grid_order,
                                      ctas, kv_parts, None)
        return status, lib.fa3nn_hopper_last_error().decode()

    for nheads, nheads_kv in ((8, 3), (8, 0)):
        assert error(nheads, nheads_kv) == (1, "nheads_kv must be positive and divide nheads (GQA/MQA: query heads "
                                               "in groups of equal size)")
    for grid_order in (4, -1):
        assert error(8, 2, grid_order=grid_order) == (1, "grid_order must be 0 (auto), 1, 2 or 3")
    # kv_parts (after ctas): a positive divisor of the group; the group of 12 / 2 heads is 6.
    for kv_parts in (0, 4, 12, -2):
        assert error(12, 2, kv_parts=kv_parts) == (1, "kv_parts must be a positive divisor of the GQA group (nheads "
                                                      "/ nheads_kv)")
    assert error(8, 2, ctas=-3) == (1, "ctas must be 0 (auto), -2 (auto, varlen of one length), -1 (one CTA per "
                                       "tile) or a positive CTA count")
    for softcap in (-1.0, float("inf"), float("nan")):
        assert error(8, 2, softcap=softcap) == (1, "softcap must be a finite number >= 0 (0: none)")
    # softcap (and the float after the window's ints) lands where the C side reads it: variant 0 is refused for it.
    assert error(8, 2, softcap=30.0) == (1, "the softcap backward is built for the default variant only (4 m128 at "
                                            "head dim 64, 1 bulk dQ at 128 and 256)")
    assert error(8, 2, variant=hopper_bwd.VARIANTS["m128"]) == (
        1, "backward variant 4 (m128, 128-row query blocks) is built for head dim 64 only")
    for variant in ("overlap", "bulk_dq_overlap", "m128"):  # head dim 256: red dQ and bulk dQ only
        assert error(8, 2, variant=hopper_bwd.VARIANTS[variant], headdim=256) == (
            1, "head dim 256's backward is built as variants 0 (red dQ) and 1 (bulk dQ, staged in the ring) only")
    unsupported = "unsupported head dims (built: q / k and v equal 64, 128 or 256, or q / k 192 with v 128)"
    assert error(8, 2, headdim=96) == (1, unsupported)
    # headdim_v lands after headdim: unequal pairs but 192 / 128 are refused, which runs bulk dQ without masks only.
    for headdim, headdim_v in ((128, 64), (192, 192)):
        assert error(8, 2, headdim=headdim, headdim_v=headdim_v) == (1, unsupported)
    assert error(8, 2, headdim=192, headdim_v=128) == (
        1, "head dims 192 / 128's backward is built as variants 1 (bulk dQ) and 5 (mla_keys) only")
    assert error(8, 2, variant=5) == (1, "unknown backward variant (built: 0 red dQ, 1 bulk dQ, 2 overlap, 3 bulk dQ "
                                         "+ overlap, 4 m128; 5 mla_keys at head dims 192 / 128 only)")
    assert error(8, 2, headdim=192, headdim_v=128, variant=1, window=(32, 0)) == (
        1, "head dims 192 / 128 have no sliding-window or softcap backward")
    # Windows: sizes of -1 or more; the default variant only, dense or varlen.
    assert error(8, 2, window=(-2, 0)) == (1, "window_left / window_right must be -1 (unbounded) or a key count >= 0")
    for cu, max_q in ((None, 100), (ctypes.c_void_p(16), 90)):  # dense, varlen
        assert error(8, 2, window=(32, 0), variant=hopper_bwd.VARIANTS["red_dq"], cu_q=cu, cu_k=cu, max_q=max_q) == (
            1, "the sliding-window backward is built for the default variant only (4 m128 at head dim 64, 1 bulk dQ at "
               "128 and 256)")
    # Varlen: both offsets or neither; a dense call's longest lengths are its lengths; the default variant only
    # (pointers that are never dereferenced: these checks run before any launch).
    cu = ctypes.c_void_p(16)
    assert error(8, 2, cu_q=cu) == (1, "pass both cu_seqlens_q and cu_seqlens_k (varlen) or neither (dense)")
    assert error(8, 2, max_q=90) == (1, "a dense backward's max_seqlen_q / max_seqlen_k must equal seqlen_q / "
                                        "seqlen_k")
    assert error(8, 2, cu_q=cu, cu_k=cu, max_q=90, variant=hopper_bwd.VARIANTS["bulk_dq_overlap"]) == (
        1, "the varlen backward is built for the default variant only (4 m128 at head dim 64, 1 bulk dQ at 128 and "
           "256)")
    assert lib.fa3nn_hopper_bwd_block_m() == 128  # the workspaces' padding unit: the largest query block
    assert error(8, 2, softmax_scale=-1.0) == (1, "softmax_scale must be positive")


def test_bulk_dq_handoff_model_passes_and_catches_a_wrong_protocol(monkeypatch):
    """The named-barrier protocol of the bulk-dQ variants (scripts/model_bwd_dq_handoff.py) under random schedules,
    with 2 buffers and m128's 1; a writer that frees its buffer even when no later step will wait for it, and a
    single-buffer consumer that waits only from step 2 on, must be caught."""
    model = load_script("model_bwd_dq_handoff")
    assert model.main() == 0

    def writer_always_frees(steps, buffers):
        for s in range(steps):
            yield ("sync", model.FULL + s % buffers)
            yield ("read", s)
            yield ("arrive", model.EMPTY + s % buffers)

    def consumer_two_buffer_rule(steps, warp, buffers):  # m128's single buffer, waited for as if there were two
        for s in range(steps):
            if s >= 2:
                yield ("sync", model.EMPTY + s % buffers)
            yield ("write", s, warp)
            yield ("arrive", model.FULL + s % buffers)

    with monkeypatch.context() as patch:
        patch.setattr(model, "writer", writer_always_frees)
        assert "partly arrived" in model.run(3, random.Random(0))
    monkeypatch.setattr(model, "consumer", consumer_two_buffer_rule)
    rng = random.Random(0)
    problems = {model.run(4, rng, buffers=1) for _ in range(200)}
    assert any(p is not None and ("overwrote" in p or "partly arrived" in p or "deadlock" in p) for p in problems)


@pytest.mark.parametrize("mutation", [None, "early_kv_free", "skip_kv_free_wait", "kv_free_parity"])
def test_persistent_protocol_model_passes_and_catches_a_wrong_protocol(mutation):
    """The persistent backward's K/V and ring barriers across tile ends (scripts/model_bwd_persistent.py) under
    random schedules, the three consumer orders (bwd_consumer's default and FlashAttention-3 order, the overlap
    consumer's); a kv_free arrive before the tile's last K read, a producer that skips the kv_free wait, or waits on
    the wrong parity, must be caught in each order."""
    model = load_script("model_bwd_persistent")
    problems = model.check(mutation, schedules=3000 if mutation is None else 500)
    if mutation is None:
        assert problems == []
    else:
        assert problems and all(("issued while" in p or "read" in p or "deadlock" in p) for p in problems), problems
        assert {order for order in model.ORDERS if any(f"order {order} " in p for p in problems)} == set(model.ORDERS)


def test_bwd_trace_phases_are_the_medians_of_the_recorded_tiles():
    """scripts/bwd_trace.py's analysis on a synthetic trace: every CTA's tiles 1..14 with known phase lengths (ns);
    unrecorded tiles (zeros) and tile 0 are left out, the loop is per step."""
    import numpy as np

    trace_script = load_script("bwd_trace")
    trace = np.zeros((trace_script.CTAS, trace_script.TILES, trace_script.EVENTS), dtype=np.int64)
    lengths = [100, 400, 8 * 2000, 300, 2500, 0]  # kv wait, first stage, loop (8 steps), final dQ, epilogue, gap
    period = sum(lengths) + 100
    for cta in range(10):  # CTAs past 9 recorded nothing
        for tile in range(trace_script.TILES):
            t0 = 1_000_000 + cta * 7 + tile * period
            trace[cta, tile] = np.cumsum([t0, *lengths[:-1]])
    got = trace_script.phases(trace, steps=8)
    assert got["tiles"] == 10 * (trace_script.TILES - 2)
    assert (got["kv_wait"], got["first_stage"], got["loop"], got["final_dq"], got["epilogue"]) == (
        0.1, 0.4, 2.0, 0.3, 2.5)
    assert got["gap"] == 0.1  # the next tile starts `period` after this one


def test_overlap_schedule_model_passes():
    """The overlap variants' order (scripts/model_bwd_overlap.py) under random schedules, d64 and d128."""
    assert load_script("model_bwd_overlap").main() == 0


@pytest.mark.parametrize("mutation, headdim, expected", [
    (dict(dq_group_at_step0=False), 64, "not complete"),
    (dict(release_before_wait=True), 64, "refilled stage"),
    (dict(release_before_wait=True), 128, "refilled stage"),
    (dict(ds_barrier=False), 128, "dS^T"),
])
def test_overlap_schedule_model_catches_a_wrong_order(mutation, headdim, expected):
    """A program without step 0's (discarded) dQ group, one that releases the ring stage before the dK/dV wait, or
    one without the d128 dS barrier must fail the model."""
    model = load_script("model_bwd_overlap")

    def mutated(wg, steps, d):
        return model.consumer_program(wg, steps, d, **mutation)

    rng = random.Random(0)
    errors = [model.run(steps, headdim, rng, mutated) for steps in (1, 3, 5) for _ in range(100)]
    assert any(e is not None and expected in e for e in errors), errors[:3]


def test_query_walk_model_passes_and_catches_a_wrong_walk():
    """BwdQueryWalk's GQA step sequence (scripts/model_bwd_query_walk.py): every (query head, block) of the group once,
    in order, with the previous-step accessors the overlap consumer's dQ hand-off uses; a walk that restarts each head
    at block 0 instead of the causal first block, or whose prev_m_block ignores the head boundary, must fail it."""
    model = load_script("model_bwd_query_walk")
    assert model.main() == 0

    class RestartsAtZero(model.Walk):
        def advance(self):
            self.m_block += 1
            if self.m_block == self.end:
                self.m_block = 0
                self.head += 1

    class PrevIgnoresHeads(model.Walk):
        def prev_m_block(self):
            return self.m_block - 1

    assert model.check(2, 4, 2, 1, RestartsAtZero) is not None
    assert "previous step" in model.check(0, 3, 2, 0, PrevIgnoresHeads)
    assert model.main(PrevIgnoresHeads) == 1


def _params(window=None, softcap=0.0):
    return AttnParams(softmax_scale=0.1, window=window or Window(), softcap=softcap, deterministic=False)


def test_softcap_arguments_of_the_backward(monkeypatch):
    """softcap is checked as the API checks it (fa3nn.checks.check_softcap) before anything runs, takes the default
    variant only, and reaches launch from backward's params."""
    args = _inputs()
    for bad, error, message in ((-1.0, ValueError, r"softcap must be >= 0"), (float("inf"), TypeError, "finite"),
                                (True, TypeError, "finite")):
        with pytest.raises(error, match=message):
            hopper_bwd.launch(softmax_scale=0.1, causal=False, softcap=bad, **args)
    with pytest.raises(ValueError, match=r"softcap 30.0: the native backward has softcap in the default variant "
                                         r"\('bulk_dq'\) only"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, softcap=30.0, variant="red_dq", **args)
    with pytest.raises(ValueError, match="softcap 1e-30 is too small for softmax_scale 1e\\+20"):
        hopper_bwd.launch(softmax_scale=1e20, causal=False, softcap=1e-30, **args)
    seen = []

    def fake_launch(dout, q, k, v, *positional, softcap=0.0, window_size=(-1, -1), **kwargs):
        seen.append(dict(softcap=softcap, window_size=window_size, k_heads=k.shape[2]))
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)

    monkeypatch.setattr(hopper_bwd, "launch", fake_launch)
    params = _params(window=Window(64, 0), softcap=30.0)
    hopper_bwd.backward(**args, dlse=None, params=params, varlen=None)
    # GQA both ways: in the kernel (NATIVE_GQA) and through expanded K / V copies.
    gqa = _inputs(nheads=4, nheads_kv=2)
    for native in (True, False):
        monkeypatch.setattr(hopper_bwd, "NATIVE_GQA", native)
        hopper_bwd.backward(**gqa, dlse=None, params=params, varlen=None)
    assert seen == [dict(softcap=30.0, window_size=(64, 0), k_heads=h) for h in (4, 2, 4)]


def test_window_arguments_and_refusals():
    """Sliding windows: the default variant only (a named error for the others and for bad sizes), dense and varlen
    calls both refused by nothing."""
    args = _inputs()
    # Bad sizes raise what the API raises for them (fa3nn.checks.check_window_size).
    pair = r"window_size must be a pair of ints"
    for bad, error, message in (((-2, 0), ValueError, r"window_size entries must be >= -1"), ((3,), TypeError, pair),
                                ((1.5, 0), TypeError, pair), ((True, 0), TypeError, pair)):
        with pytest.raises(error, match=message):
            hopper_bwd.launch(softmax_scale=0.1, causal=False, window_size=bad, **args)
    with pytest.raises(ValueError, match=r"window_size \(32, 0\): the native backward has sliding windows in the "
                                         r"default variant \('bulk_dq'\) only"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, window_size=(32, 0), variant="red_dq", **args)
    # Causal (-1, 0) and full (-1, -1) are not windows; (-1, 5) and (0, 0) are.
    assert [hopper_bwd.window_of(c, w).sliding for c, w in
            ((False, (-1, -1)), (True, (-1, -1)), (True, (-1, 7)), (False, (-1, 5)), (False, (0, 0)))] == [
        False, False, False, True, True]
    call = AttnCall(device_type="cuda", capability=(9, 0), dtype=torch.bfloat16, headdim=128, headdim_v=128,
                    nheads=4, nheads_kv=4, varlen=True, window=Window(32, 0), softcap=0.0, deterministic=False)
    assert hopper_bwd.refusal(call) is None
    assert hopper_bwd.refusal(dataclasses.replace(call, varlen=False)) is None


def _varlen_inputs(lengths_q, lengths_k, nheads=4, nheads_kv=4, headdim=128, dtype=torch.bfloat16, device="cpu",
                   headdim_v=None):
    """Packed (total, heads, d) inputs (v, out, dout: headdim_v, default headdim), the forward's (nheads, total_q)
    lse and their Varlen."""
    total_q, total_k = sum(lengths_q), sum(lengths_k)
    headdim_v = headdim if headdim_v is None else headdim_v
    q = torch.randn(total_q, nheads, headdim, dtype=dtype, device=device)
    k = torch.randn(total_k, nheads_kv, headdim, dtype=dtype, device=device)
    v = torch.randn(total_k, nheads_kv, headdim_v, dtype=dtype, device=device)
    starts_q = tuple(int(x) for x in torch.tensor([0, *lengths_q]).cumsum(0))
    starts_k = tuple(int(x) for x in torch.tensor([0, *lengths_k]).cumsum(0))
    varlen = Varlen(torch.tensor(starts_q, dtype=torch.int32, device=device),
                    torch.tensor(starts_k, dtype=torch.int32, device=device), max(lengths_q), max(lengths_k),
                    starts_q, starts_k)
    o_shape = (total_q, nheads, headdim_v)
    args = dict(dout=torch.randn(o_shape, dtype=dtype, device=device), q=q, k=k, v=v,
                out=torch.randn(o_shape, dtype=dtype, device=device),
                lse=torch.randn(nheads, total_q, dtype=torch.float32, device=device))
    return args, varlen


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a, vl: (_with(a, q=a["q"][None]), vl),
         r"q must be 3-d \(total_rows, nheads, headdim\) with cu_seqlens"),
        (lambda a, vl: (_with(a, k=a["k"][:, :, :64]), vl),
         r"expected \(total_k, nheads, 128\)"),
        (lambda a, vl: (_with(a, lse=a["lse"].t()), vl),
         r"expected the forward's float32 \(nheads, total_q\) = \(4, 300\)"),
        (lambda a, vl: (a, dataclasses.replace(vl, max_seqlen_q=200, seqstarts_q=(0, 100, 299))),
         r"cu_seqlens_q must run from 0 to the packed rows \(300\)"),
        (lambda a, vl: (a, dataclasses.replace(vl, max_seqlen_q=150)),
         r"no sequence longer than its max_seqlen \(150\)"),
        (lambda a, vl: (a, dataclasses.replace(vl, cu_seqlens_q=vl.cu_seqlens_q[:2])),
         r"cu_seqlens_q must be a 1-d tensor of batch \+ 1 = 3"),
    ],
)
def test_check_arguments_names_the_bad_varlen_argument(change, expected):
    args, varlen = change(*_varlen_inputs([100, 200], [50, 0]))
    with pytest.raises(ValueError, match=expected):
        hopper_bwd.check_arguments(softmax_scale=0.1, varlen=varlen, **args)


def test_varlen_launch_checks_before_the_gpu():
    args, varlen = _varlen_inputs([100, 0, 7], [0, 30, 7], nheads=4, nheads_kv=2)
    hopper_bwd.check_arguments(softmax_scale=0.1, varlen=varlen, **args)  # valid: no exception
    with pytest.raises(ValueError, match="q must be 3-d"):  # a dense call's tensors with varlen metadata
        hopper_bwd.launch(softmax_scale=0.1, causal=False, varlen=varlen, **_inputs())
    with pytest.raises(ValueError, match="variant 'red_dq': the varlen backward of head dim 128 is built as "
                                         "'bulk_dq' only"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, varlen=varlen, variant="red_dq", **args)
    assert hopper_bwd.varlen_variants(192) == ("bulk_dq", "mla_keys")  # MLA builds both variants varlen
    with pytest.raises(ValueError, match="needs a CUDA"):
        hopper_bwd.launch(softmax_scale=0.1, causal=False, varlen=varlen, **args)


@pytest.mark.parametrize("lengths", [[1], [128], [129, 0, 1, 255, 64], [0, 0, 3], list(range(0, 700, 37))])
def test_varlen_workspace_gives_every_sequence_its_own_whole_blocks(lengths):
    """flash_bwd_seq.cuh's layout (sequence b at (cu_seqlens_q[b] + 128 b) rounded down to 128, hopper_bwd
    .varlen_ws_row0) inside workspace_shape's rows: each sequence's rows rounded up to 128 (whole query blocks of
    every variant) are disjoint from the next sequence's and end within the workspace."""
    rows = 128
    starts = [0, *torch.tensor(lengths).cumsum(0).tolist()]
    ws_batch, ws_rows = hopper_bwd.workspace_shape(len(lengths), starts[-1], rows, varlen=True)
    assert ws_batch == 1
    row0 = [hopper_bwd.varlen_ws_row0(start, b, rows) for b, start in enumerate(starts)]
    assert row0[-1] == ws_rows
    for b, length in enumerate(lengths):
        assert row0[b] % rows == 0
        assert row0[b] + -(-length // rows) * rows <= row0[b + 1], (b, row0)
    assert hopper_bwd.workspace_shape(3, 300, rows, varlen=False) == (3, 384)


def test_gqa_backward_expands_kv_and_sums_each_group(monkeypatch):
    """The GQA/MQA wrapper around the MHA kernel, on the CPU: `launch` replaced by the exact MHA backward (fp32
    autograd of attention_ref), so what is checked is the wrapper's head mapping (query head h reads K/V head
    h // group) and group sums, against the reference's own GQA backward."""

    def mha_backward(dout, q, k, v, out, lse, softmax_scale, causal, dlse=None, varlen=None, window_size=(-1, -1),
                     softcap=0.0, sinks=None):
        assert q.shape[2] == k.shape[2] and sinks is None, "the kernel must see MHA"
        leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
        o, _ = attention_ref(*leaves, causal=causal, softmax_scale=softmax_scale)
        o.backward(dout.float())
        return tuple(t.grad.to(q.dtype) for t in leaves)

    monkeypatch.setattr(hopper_bwd, "launch", mha_backward)
    monkeypatch.setattr(hopper_bwd, "NATIVE_GQA", False)  # the expansion path (the default is the in-kernel one)
    for nheads_kv in (2, 1):
        args = _inputs(nheads=6, nheads_kv=nheads_kv, dtype=torch.float32)
        got = hopper_bwd.backward(**args, dlse=None, params=_params(), varlen=None)
        leaves = [args[n].detach().clone().requires_grad_() for n in ("q", "k", "v")]
        out, _ = attention_ref(*leaves, softmax_scale=0.1)
        out.backward(args["dout"])
        for name, g, leaf in zip(("dq", "dk", "dv"), got, leaves):
            assert g.shape == leaf.shape, name
            torch.testing.assert_close(g, leaf.grad, rtol=1e-5, atol=1e-5, msg=f"{name} (nheads_kv {nheads_kv})")


@pytest.mark.parametrize("group, nheads_kv, key_blocks, causal, sms, expected", [
    (8, 1, 64, True, 132, 8),     # Llama-3-70B under 8-way tensor parallelism, one 8k sequence: 64 tiles -> 512
    (8, 1, 64, False, 132, 2),    # non-causal: 2, 4 and 8 parts fill 0.97 of their waves; the fewest
    (8, 1, 16, False, 132, 8),    # one 2k sequence: 16 tiles -> 128
    (4, 8, 16, False, 132, 1),    # Llama-3-8B, one 2k sequence: 128 tiles already (s49a: split, 0.82x)
    (8, 1, 64, True, 10, 1),      # enough tiles for 10 SMs as it is
    (4, 8, 64, True, 132, 1),     # Llama-3-8B, one 8k sequence: 512 tiles
    (4, 8, 16, True, 132, 4),     # ... one 2k sequence: 128 tiles -> 512
    (16, 1, 16, True, 132, 16),   # MQA 16 / 1 at 2k: every query head its own tile, and still short of 264
    (6, 1, 16, True, 132, 6),     # 16 x 3 = 48 tiles are short of 264: the whole group, 6
    (6, 1, 64, True, 132, 6),     # 64 x 3 = 192 too
    (6, 2, 64, True, 132, 3),     # 128 x 3 = 384: 3 parts, no power of two
    (7, 4, 16, True, 132, 7),     # Qwen2.5-7B's 28 / 4 at one 2k sequence: 64 tiles -> 448
    (7, 4, 64, True, 132, 7),     # ... one 8k sequence: 256 tiles, short of 264; 7 is the next divisor
    (7, 1, 64, False, 132, 7),    # Qwen under 4-way TP (7 / 1), non-causal: 64 tiles fill 0.48, 448 fill 0.85
    (4, 1, 140, False, 132, 4),   # 140 tiles fill 0.53 of 2 waves, 280 0.71 of 3, 560 0.85 of 5
    (2, 1, 120, False, 132, 1),   # 120 tiles fill 0.91 of one wave, 240 the same of 2: no split
    (16, 1, 120, False, 132, 1),  # MQA: 0.91 whole, 0.97-0.99 in parts, short of MIN_SPLIT_GAIN (1.25)
    (2, 1, 200, False, 132, 1),   # 0.76 whole, 400 tiles 0.76 too
    (4, 1, 200, False, 132, 1),   # 800 tiles fill 0.87: 1.15x the whole groups', short of 1.25
    (2, 1, 4, False, 132, 2),     # 4 tiles fill 0.03, 8 fill 0.06: twice the SMs busy (an absolute slack took 1)
    (8, 1, 1, False, 132, 8),     # MQA 8 / 1 at one 128-key sequence: 1 tile -> 8 (an absolute slack took 2)
    (6, 1, 16, False, 132, 6),    # 96 tiles fit one wave
    (6, 1, 32, False, 132, 3),    # 96 do, 192 would not
    (1, 16, 1, True, 132, 1),     # MHA is never split
    (1, 16, 1, False, 132, 1),
])
def test_kv_parts_rule(group, nheads_kv, key_blocks, causal, sms, expected):
    assert hopper_bwd.kv_parts(group, nheads_kv, key_blocks, causal, sms) == expected


def test_key_blocks_count_each_sequence():
    """kv_parts' tile count: dense batch x ceil(seqlen_k / block), varlen the sum over sequences; head dim 256's
    blocks are 64 keys."""
    k = torch.empty(3, 300, 2, 128)
    assert hopper_bwd._key_blocks(k, None) == 3 * 3
    assert hopper_bwd._key_blocks(torch.empty(3, 300, 2, 256), None) == 3 * 5
    starts = [0, 1, 129, 129, 400]  # lengths 1, 128, 0, 271
    cu = torch.tensor(starts, dtype=torch.int32)
    varlen = Varlen(cu, cu, 271, 271, tuple(starts), tuple(starts))
    assert hopper_bwd._key_blocks(torch.empty(400, 2, 128), varlen) == 1 + 1 + 0 + 3


def _recording_launch(seen):
    def fake_launch(dout, q, k, v, *positional, kv_parts=1, max_ctas=None, **kwargs):
        seen.append((k.shape[-2], kv_parts, max_ctas))
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    return fake_launch


@pytest.mark.parametrize("setting, causal, expected", [("auto", True, 8), ("auto", False, 8), (2, True, 2),
                                                        (1, True, 1)])
def test_backward_passes_the_parts_to_launch(monkeypatch, setting, causal, expected):
    """KV_PARTS reaches launch as kv_parts with K / V as they are (the kernel splits the group; no copies): "auto" on a
    stand-in of 64 SMs with 2 x 1 key blocks x 2 K/V heads (4 tiles) gives the group, 8, either way."""
    seen = []
    monkeypatch.setattr(hopper_bwd, "launch", _recording_launch(seen))
    monkeypatch.setattr(hopper_bwd, "KV_PARTS", setting)
    monkeypatch.setattr(hopper_bwd, "_sm_count", lambda device: 64)
    args = _inputs(nheads=16, nheads_kv=2, seqlen_q=40, seqlen_k=56, dtype=torch.float32)
    hopper_bwd.backward(**args, dlse=None, params=_params(window=Window(-1, 0) if causal else None), varlen=None)
    assert seen == [(2, expected, None)]


@pytest.mark.parametrize("bad", [3, 0, 8, -2, "two", 2.0, True])
def test_launch_refuses_parts_that_do_not_split_the_group(bad):
    """launch's kv_parts: a positive divisor of the group (8 / 2 heads: 4), named before anything runs (CPU tensors:
    the device check comes after)."""
    with pytest.raises(ValueError, match=r"kv_parts must be a positive divisor of the GQA group \(4 query heads per "
                                         r"K/V head\), got"):
        hopper_bwd.launch(**_inputs(nheads=8, nheads_kv=2), softmax_scale=0.1, causal=False, kv_parts=bad)


def test_sm_margin_does_not_change_the_parts(monkeypatch):
    """sm_margin schedules the same tiles on fewer SMs; it must not change dK / dV (test_sm_margin.py's GPU test wants
    them bitwise equal), so the parts come from the device's SMs, not from the margin's CTA cap. 2 x 8 key blocks x 2
    K/V heads = 32 tiles, causal on 132 SMs: 4 parts, whatever the margin."""
    seen = []
    monkeypatch.setattr(hopper_bwd, "launch", _recording_launch(seen))
    monkeypatch.setattr(hopper_bwd, "KV_PARTS", "auto")
    monkeypatch.setattr(hopper_bwd, "_sm_count", lambda device: 132)
    monkeypatch.setattr(hopper_bwd, "max_ctas_leaving", lambda margin, device: 132 - margin)
    args = _inputs(nheads=8, nheads_kv=2, seqlen_k=900, dtype=torch.float32)
    for margin in (0, 100, 131):
        hopper_bwd.backward(**args, dlse=None, params=dataclasses.replace(_params(Window(-1, 0)), sm_margin=margin),
                            varlen=None)
    assert seen == [(2, 4, None), (2, 4, 32), (2, 4, 1)]


@pytest.mark.parametrize("native_gqa", [True, False])
def test_backward_routes_gqa_by_the_native_gqa_flag(monkeypatch, native_gqa):
    """NATIVE_GQA on: `launch` gets K/V as they are (nheads_kv heads) and its dK/dV are returned untouched; off: it
    gets the expanded copies (the test above checks that path's sums)."""
    seen = {}

    def fake_launch(dout, q, k, v, out, lse, softmax_scale, causal, dlse=None, varlen=None, window_size=(-1, -1),
                    softcap=0.0, sinks=None, kv_parts=1):
        seen["k_heads"] = k.shape[2]
        return torch.zeros_like(q), torch.full_like(k, 2.0), torch.full_like(v, 3.0)

    monkeypatch.setattr(hopper_bwd, "launch", fake_launch)
    monkeypatch.setattr(hopper_bwd, "NATIVE_GQA", native_gqa)
    args = _inputs(nheads=8, nheads_kv=2, dtype=torch.float32)
    dq, dk, dv = hopper_bwd.backward(**args, dlse=None, params=_params(), varlen=None)
    assert seen["k_heads"] == (2 if native_gqa else 8)
    assert dk.shape == args["k"].shape and dv.shape == args["v"].shape
    # Expansion sums 4 copies of the fake's constant per K/V head; the native path returns it as is.
    assert torch.equal(dk, torch.full_like(args["k"], 2.0 if native_gqa else 8.0))
    assert torch.equal(dv, torch.full_like(args["v"], 3.0 if native_gqa else 12.0))


def _hopper_ready() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


needs_hopper = pytest.mark.skipif(not _hopper_ready(), reason="needs an sm_90 (Hopper) GPU")


def _reference_grads(q, k, v, dout, causal, upcast, **masks):
    """dq, dk, dv of attention_ref (`masks`: its window_size / softcap)."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, _ = attention_ref(*leaves, causal=causal, upcast=upcast, reorder_ops=not upcast, **masks)
    out.backward(dout)
    return [t.grad for t in leaves]


def _poisoned_like(t):
    return torch.full_like(t, float("nan"))


def _nan_partials(monkeypatch):
    """launch's fp32 partial dK / dV buffers (GQA in parts) NaN-filled: launch does not zero them (hopper_bwd.
    _partial_buffer), so a row no tile writes and launch does not zero reaches dk / dv as NaN."""
    real = hopper_bwd._partial_buffer
    monkeypatch.setattr(hopper_bwd, "_partial_buffer", lambda like, parts: real(like, parts).fill_(float("nan")))


def _check_against_reference(dtype, headdim, causal, seqlens, variant, nheads=4, nheads_kv=None, grid_order="auto",
                             batch=None, headdim_v=None, **schedule):
    """Runs `variant` on NaN-poisoned gradients, asserts the error-ratio rule per gradient; returns the inputs and
    the gradients for further checks. nheads_kv (default nheads) below nheads: GQA/MQA in the kernel; headdim_v: v's
    head dim (default headdim); `schedule`: launch's schedule / max_ctas."""
    from fa3nn.backends.hopper import launch as forward

    seqlen_q, seqlen_k = seqlens
    batch = batch or (1 if seqlen_q * seqlen_k > 1 << 22 else 2)
    nheads_kv = nheads if nheads_kv is None else nheads_kv
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device="cuda",
                         headdim_v=headdim_v)
    scale = headdim**-0.5
    out, lse = forward(q, k, v, scale, causal)
    dout = torch.randn_like(out)
    dq, dk, dv = (_poisoned_like(t) for t in (q, k, v))
    hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, dq=dq, dk=dk, dv=dv, variant=variant,
                      grid_order=grid_order, **schedule)
    ref = _reference_grads(q, k, v, dout, causal, upcast=True)
    pt = _reference_grads(q, k, v, dout, causal, upcast=False)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (unwritten rows of the poisoned buffer, or NaN math)"
        assert_error_ratio(got, r, p, name)
    return (dout, q, k, v, out, lse, scale), (dq, dk, dv)


def _check_masked(q, k, v, causal, window_size, softcap, label, **launch_kw):
    """launch with a window and / or softcap on NaN-poisoned gradients (out and lse from the reference forward),
    asserting the error-ratio rule per gradient; returns the params and (dq, dk, dv)."""
    from fa3nn.backends.reference import ReferenceBackend

    scale = q.shape[-1]**-0.5
    params = AttnParams(softmax_scale=scale, window=Window.from_args(causal, window_size), softcap=softcap,
                        deterministic=False)
    out, lse = ReferenceBackend().forward(q, k, v, params, None)
    dout = torch.randn_like(out)
    dq, dk, dv = (_poisoned_like(t) for t in (q, k, v))
    hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, dq=dq, dk=dk, dv=dv, window_size=window_size,
                      softcap=softcap, **launch_kw)
    ref, pt = (_reference_grads(q, k, v, dout, causal, upcast, window_size=window_size, softcap=softcap)
               for upcast in (True, False))
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (unwritten rows of the poisoned buffer, or NaN math; {label})"
        assert_error_ratio(got, r, p, f"{name} ({label})")
    return params, (dq, dk, dv)


@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_backward_matches_reference(dtype, headdim, causal, seqlens):
    _check_against_reference(dtype, headdim, causal, seqlens, "red_dq")


# Varlen: packed sequences of their own lengths, dQ / dK / dV against each sequence's dense reference backward, by
# the error-ratio rule over the packed whole, NaN-poisoned first. The lengths cover a sequence without queries (its
# keys' dK / dV are zero: the kernel skips its tiles), one without keys (its queries' dQ is zero), single rows, rows
# that end inside a 64 / 128-row block, query and key lengths that differ (causal is bottom-right per sequence), the
# longest sequence's key blocks past the others' (empty tiles), and GQA; one CTA per tile and persistent launches
# (few CTAs, so each skips empty tiles between the ones it walks).
VARLEN_CASES = {
    "mixed": ([300, 0, 1, 129, 64, 700, 17], [250, 40, 1, 129, 200, 700, 0]),
    "long": ([1500, 3, 1024], [1500, 513, 2048]),
}


def _varlen_reference(args, varlen, causal, scale, upcast, **masks):
    """Each sequence's dense reference gradients, packed; zeros where a sequence has no queries or no keys. `masks`:
    attention_ref's window_size / softcap."""
    grads = [torch.zeros_like(args[n]) for n in ("q", "k", "v")]
    for b in range(varlen.batch):
        rq = slice(varlen.seqstarts_q[b], varlen.seqstarts_q[b + 1])
        rk = slice(varlen.seqstarts_k[b], varlen.seqstarts_k[b + 1])
        if rq.start == rq.stop or rk.start == rk.stop:
            continue
        leaves = [args["q"][rq][None], args["k"][rk][None], args["v"][rk][None]]
        leaves = [t.detach().clone().requires_grad_() for t in leaves]
        out, _ = attention_ref(*leaves, causal=causal, softmax_scale=scale, upcast=upcast, reorder_ops=not upcast,
                               **masks)
        out.backward(args["dout"][rq][None])
        for g, leaf, rows in zip(grads, leaves, (rq, rk, rk)):
            g[rows] = leaf.grad[0]
    return grads


@pytest.mark.parametrize("schedule", [dict(schedule="per_tile"), dict(schedule="persistent", max_ctas=3)],
                         ids=lambda s: s["schedule"])
@pytest.mark.parametrize("case", list(VARLEN_CASES))
@pytest.mark.parametrize("heads", [(4, 4), (6, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_varlen_backward_matches_reference(dtype, headdim, causal, heads, case, schedule):
    _varlen_case(dtype, headdim, causal, heads, case, schedule)


def _varlen_case(dtype, headdim, causal, heads, case, schedule, headdim_v=None):
    from fa3nn.backends.hopper import launch as forward

    lengths_q, lengths_k = VARLEN_CASES[case]
    args, varlen = _varlen_inputs(lengths_q, lengths_k, *heads, headdim, dtype, device="cuda", headdim_v=headdim_v)
    scale = headdim**-0.5
    args["out"], args["lse"] = forward(args["q"], args["k"], args["v"], scale, causal, varlen)
    dq, dk, dv = (_poisoned_like(args[n]) for n in ("q", "k", "v"))
    hopper_bwd.launch(**args, softmax_scale=scale, causal=causal, dq=dq, dk=dk, dv=dv, varlen=varlen, **schedule)
    ref = _varlen_reference(args, varlen, causal, scale, upcast=True)
    pt = _varlen_reference(args, varlen, causal, scale, upcast=False)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (unwritten rows of the poisoned buffer, or NaN math)"
        assert_error_ratio(got, r, p, name)
    # The empty sequences' gradients are exactly zero (no key: dQ; no query: dK, dV).
    for b in range(varlen.batch):
        rq = slice(varlen.seqstarts_q[b], varlen.seqstarts_q[b + 1])
        rk = slice(varlen.seqstarts_k[b], varlen.seqstarts_k[b + 1])
        if rk.start == rk.stop:
            assert not dq[rq].any(), f"sequence {b} has no keys but nonzero dq"
        if rq.start == rq.stop:
            assert not dk[rk].any() and not dv[rk].any(), f"sequence {b} has no queries but nonzero dk / dv"


# GQA/MQA in parts through `backward` (KV_PARTS -> launch's kv_parts: each tile walks group / parts query heads and
# writes an fp32 partial dK / dV, summed once): 8 query heads on one K/V head, dense and varlen (the mixed case: empty
# sequences' keys get exactly zero dK / dV through the sums too), causal or not, every head-dim pair's default kernel,
# against the reference gradients by the error-ratio rule (backward allocates dq / dk / dv, so nothing is poisoned here;
# test_gqa_parts_in_the_other_kernels checks on NaN-poisoned ones that launch's sums write every dk / dv element).
# (s49a's first form of the parts, K/V copies with bf16 partials, broke the rule once: d256 varlen non-causal, 2 parts,
# dv 6.25e-2 against 5.63e-2.)
@pytest.mark.parametrize("parts", [1, 2, 8, "auto"])
@pytest.mark.parametrize("varlen_case", [None, "mixed"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dims", [(64, 64), (128, 128), (256, 256), (192, 128)], ids=lambda d: f"d{d[0]}_{d[1]}")
@pytest.mark.gpu
@needs_hopper
def test_gqa_parts_backward_matches_reference(monkeypatch, dims, causal, varlen_case, parts):
    _check_backward_in_parts(monkeypatch, dims, causal, varlen_case, parts, nheads=8, nheads_kv=1)


def _check_backward_in_parts(monkeypatch, dims, causal, varlen_case, parts, nheads, nheads_kv):
    """backward with KV_PARTS = parts on nheads / nheads_kv heads, dense (one 1000-token sequence) or VARLEN_CASES[
    varlen_case], against the reference gradients by the error-ratio rule (launch's partials NaN-filled); varlen:
    sequences without queries get exactly zero dk / dv."""
    from fa3nn.backends.hopper import launch as forward

    _nan_partials(monkeypatch)
    headdim, headdim_v = dims
    monkeypatch.setattr(hopper_bwd, "KV_PARTS", parts)
    scale = headdim**-0.5
    params = dataclasses.replace(_params(window=Window(-1, 0) if causal else None), softmax_scale=scale)
    if varlen_case is None:
        q, k, v = random_qkv(1, 1000, 1000, nheads, nheads_kv, headdim, torch.bfloat16, device="cuda",
                             headdim_v=headdim_v)
        out, lse = forward(q, k, v, scale, causal)
        args, varlen = dict(dout=torch.randn_like(out), q=q, k=k, v=v, out=out, lse=lse), None
    else:
        args, varlen = _varlen_inputs(*VARLEN_CASES[varlen_case], nheads, nheads_kv, headdim, torch.bfloat16,
                                      device="cuda", headdim_v=headdim_v)
        args["out"], args["lse"] = forward(args["q"], args["k"], args["v"], scale, causal, varlen)
    got = hopper_bwd.backward(**args, dlse=None, params=params, varlen=varlen)
    if varlen is None:
        ref = _reference_grads(args["q"], args["k"], args["v"], args["dout"], causal, upcast=True)
        pt = _reference_grads(args["q"], args["k"], args["v"], args["dout"], causal, upcast=False)
    else:
        ref = _varlen_reference(args, varlen, causal, scale, upcast=True)
        pt = _varlen_reference(args, varlen, causal, scale, upcast=False)
    for name, g, r, p in zip(("dq", "dk", "dv"), got, ref, pt):
        assert g.shape == r.shape and not g.isnan().any(), name
        assert_error_ratio(g, r, p, f"{name} (parts {parts}, {varlen_case or 'dense'})")
    if varlen is not None:
        for b in range(varlen.batch):
            rk = slice(varlen.seqstarts_k[b], varlen.seqstarts_k[b + 1])
            if varlen.seqstarts_q[b + 1] == varlen.seqstarts_q[b]:
                assert not got[1][rk].any() and not got[2][rk].any(), f"sequence {b}: no queries, nonzero dk / dv"


# Parts that are no power of two (C ABI 9: the producer finds a tile's K/V head by a division): groups of 6 in 3 and
# 6 parts and of 7 in 7 (Qwen2.5-7B's 28 / 4 heads), dense and varlen (the mixed case), every head-dim pair's default
# kernel, NaN-poisoned for dense (launch's sums must write every dK / dV element), by the error-ratio rule.
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dims", [(64, 64), (128, 128), (256, 256), (192, 128)], ids=lambda d: f"d{d[0]}_{d[1]}")
@pytest.mark.gpu
@needs_hopper
def test_gqa_parts_of_any_divisor(monkeypatch, dims, causal):
    _nan_partials(monkeypatch)
    headdim, headdim_v = dims
    for nheads, nheads_kv, kv_parts in ((12, 2, 3), (12, 2, 6), (14, 2, 7)):
        _check_against_reference(torch.bfloat16, headdim, causal, (511, 700), hopper_bwd.default_variant(headdim),
                                 nheads=nheads, nheads_kv=nheads_kv, headdim_v=headdim_v, kv_parts=kv_parts)
    _check_backward_in_parts(monkeypatch, dims, causal, "mixed", 7, nheads=14, nheads_kv=2)


@pytest.mark.parametrize("variant", ["red_dq", "bulk_dq", "bulk_dq_overlap"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_gqa_parts_in_every_d128_variant(monkeypatch, causal, variant):
    """launch's kv_parts in the d128 variants besides the default (their own consumers store dK / dV through the same
    store_rows): 2 and 4 parts of a group of 4 against the reference by the error-ratio rule, NaN-filled partials."""
    _nan_partials(monkeypatch)
    for kv_parts in (2, 4):
        _check_against_reference(torch.bfloat16, 128, causal, (700, 900), variant, nheads=8, nheads_kv=2,
                                 kv_parts=kv_parts)


# GQA in parts in the kernels the two tests above leave out, each with its own consumer, tiles or columns ahead of the
# shared BwdConsumer::store_rows: d64's other variants (the key-split dQ, overlap with dP^T ahead), d128's overlap,
# d256's red_dq, 192 / 128's 64-key column split (bulk_dq, flash_bwd_mla.cuh: dK / dV from panel columns 128 / 64),
# dense and varlen; chains of the parts' tiles on 3 CTAs in both grid orders; fp16; windows (skipped tiles: exactly
# zero dK / dV through the sums) and softcap (the d128 varlen softcap kernel publishes its tiles, BwdConfig::
# kPublishTiles): NaN-poisoned dq / dk / dv (launch's sums must overwrite every dk / dv element) by the error-ratio
# rule; sinks with a gradient into lse: dQ / dK / dV / dsinks against whole groups'. 8 query heads on 2 K/V heads
# (group 4). Passed on an H100 in s50a.
@pytest.mark.parametrize("kv_parts", [2, 4])
@pytest.mark.gpu
@needs_hopper
def test_gqa_parts_in_the_other_kernels(monkeypatch, kv_parts):
    from fa3nn.backends.hopper import launch as forward

    _nan_partials(monkeypatch)
    for headdim, variant in ((64, "red_dq"), (64, "bulk_dq"), (64, "overlap"), (64, "bulk_dq_overlap"),
                             (128, "overlap"), (256, "red_dq"), (MLA[0], "bulk_dq")):
        for causal in (False, True):
            _check_against_reference(torch.bfloat16, headdim, causal, (511, 1537), variant, nheads=8, nheads_kv=2,
                                     headdim_v=MLA[1] if headdim == MLA[0] else None, kv_parts=kv_parts)
    for causal in (False, True):
        for grid_order in ("key_blocks_inner", "key_blocks_outer", "key_blocks_outer_per_batch"):
            _check_against_reference(torch.bfloat16, 128, causal, (1000, 1000), "bulk_dq", nheads=8, nheads_kv=2,
                                     grid_order=grid_order, schedule="persistent", max_ctas=3, kv_parts=kv_parts)
        _check_against_reference(torch.float16, 128, causal, (700, 900), "bulk_dq", nheads=8, nheads_kv=2,
                                 kv_parts=kv_parts)
        _varlen_case(torch.bfloat16, MLA[0], causal, (8, 2), "mixed", dict(variant="bulk_dq", kv_parts=kv_parts),
                     headdim_v=MLA[1])
        _varlen_case(torch.bfloat16, 256, causal, (8, 2), "mixed",
                     dict(schedule="persistent", max_ctas=3, kv_parts=kv_parts))
    # Windows and softcap (dense: out and lse from the reference forward, as the window tests above).
    for headdim in HEADDIMS:
        for (causal, window_size), softcap in (((False, (100, 30)), 0.0), ((True, (200, -1)), 0.0),
                                               ((False, (-1, -1)), 5.0), ((True, (300, -1)), 5.0)):
            q, k, v = random_qkv(2, 511, 1537, 8, 2, headdim, torch.bfloat16, device="cuda")
            q = q * 4 if softcap else q
            label = f"d{headdim} window {window_size} causal {causal} cap {softcap}"
            params, (dq, dk, dv) = _check_masked(q, k, v, causal, window_size, softcap, label, kv_parts=kv_parts)
            allowed = params.window.allowed(0, 511, 511, 1537, "cuda")
            if allowed is not None:
                unreached = ~allowed.any(0)
                assert not dk[:, unreached].any() and not dv[:, unreached].any(), label
    # Varlen softcap at d128, non-causal: the kernel that publishes its tiles.
    args, varlen = _varlen_inputs(*VARLEN_CASES["mixed"], 8, 2, 128, torch.bfloat16, device="cuda")
    args["q"] = args["q"] * 4
    scale, masks = 128**-0.5, dict(window_size=(-1, -1), softcap=5.0)
    args["out"], args["lse"] = forward(args["q"], args["k"], args["v"], scale, False, varlen, **masks)
    dq, dk, dv = (_poisoned_like(args[n]) for n in ("q", "k", "v"))
    hopper_bwd.launch(**args, softmax_scale=scale, causal=False, dq=dq, dk=dk, dv=dv, varlen=varlen, kv_parts=kv_parts,
                      **masks)
    ref = _varlen_reference(args, varlen, False, scale, upcast=True, **masks)
    pt = _varlen_reference(args, varlen, False, scale, upcast=False, **masks)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (varlen, cap 5)"
        assert_error_ratio(got, r, p, f"{name} (varlen, cap 5)")
    # Sinks and dlse: the parts change nothing but dK / dV's rounding (and dQ's atomics' order).
    q, k, v = random_qkv(2, 700, 900, 8, 2, 128, torch.bfloat16, device="cuda")
    scale, sinks = 128**-0.5, torch.randn(8, device="cuda")
    out, lse = forward(q, k, v, scale, True, sinks=sinks)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    whole = hopper_bwd.launch(dout, q, k, v, out, lse, scale, True, dlse=dlse, sinks=sinks)
    parts = hopper_bwd.launch(dout, q, k, v, out, lse, scale, True, dlse=dlse, sinks=sinks, kv_parts=kv_parts)
    for name, got, expected in zip(("dq", "dk", "dv", "dsinks"), parts, whole):
        expected = expected.float()
        torch.testing.assert_close(got.float(), expected, rtol=2**-6, atol=1e-3 * expected.abs().max().item(),
                                   msg=lambda m, name=name: f"{name} (sinks): {m}")


# Sliding windows (BwdConfig::kLocal; the native forward has none, so out and lse come from the reference backend's
# forward): against the reference gradients by the error-ratio rule, NaN-poisoned first. Windows bounded on the left,
# the right, both, down to the diagonal alone, and causal with a left bound; 511x1537 leaves key blocks that no query's
# window reaches (skipped tiles: their dK / dV must come out exactly zero), 1537x511 query rows that see no key, and
# GQA walks a group's heads per key block.
WINDOWS = [((100, -1), False), ((-1, 70), False), ((64, 64), False), ((0, 0), False), ((200, -1), True)]


@pytest.mark.parametrize("seqlens", [(511, 1537), (1537, 511), (1000, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"w{w[0][0]}_{w[0][1]}{'_causal' if w[1] else ''}")
@pytest.mark.parametrize("heads", [(4, 4), (6, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_window_backward_matches_reference(headdim, heads, window, seqlens):
    (window_size, causal), (nheads, nheads_kv) = window, heads
    q, k, v = random_qkv(2, *seqlens, nheads, nheads_kv, headdim, torch.bfloat16, device="cuda")
    params, (dq, dk, dv) = _check_masked(q, k, v, causal, window_size, 0.0, f"window {window_size}")
    # Keys no query's window reaches: exactly zero (their tiles are skipped, the buffers zeroed first).
    unreached = ~params.window.allowed(0, seqlens[0], *seqlens, "cuda").any(0)
    assert not dk[:, unreached].any() and not dv[:, unreached].any()


# Window sides up to fa3nn.checks.WINDOW_MAX, bounded by the sequence lengths before the int32 kernels
# (Window.kernel_sides; the forward's test above says why): the same checks as the windows above.
WIDE_WINDOWS = [((WINDOW_MAX, WINDOW_MAX), False), ((WINDOW_MAX, 0), False), ((0, WINDOW_MAX), False),
                ((-1, WINDOW_MAX - 60), False)]


@pytest.mark.parametrize("seqlens", [(511, 1537), (1537, 511)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("window", WIDE_WINDOWS, ids=lambda w: f"w{w[0][0]}_{w[0][1]}")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_windows_up_to_int32_max_backward(headdim, window, seqlens):
    test_window_backward_matches_reference(headdim, (6, 2), window, seqlens)


# Softcap (BwdConfig::kSoftcap, Gemma 2): out and lse from the reference forward with the same cap, the gradients
# against the reference's by the error-ratio rule, NaN-poisoned first. q is scaled by 4 (scores of standard deviation
# ~4): at cap 5 many scores lie in tanh's flat tails (1 - t^2 near 0, where a kernel without the factor is far off), at
# Gemma 2's 50 few. Masks as the softcap forward's tests (full, causal, a two-sided window, causal with a left
# bound), ragged lengths both ways, MHA and GQA.
SOFTCAP_MASKS = [(False, (-1, -1)), (True, (-1, -1)), (False, (100, 30)), (True, (300, -1))]


def _mask_id(mask):
    return f"{'causal' if mask[0] else 'full'}_w{mask[1][0]}_{mask[1][1]}"


@pytest.mark.parametrize("softcap", [5.0, 50.0], ids=lambda c: f"cap{c:g}")
@pytest.mark.parametrize("seqlens", [(511, 1537), (1537, 511), (1000, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("mask", SOFTCAP_MASKS, ids=_mask_id)
@pytest.mark.parametrize("heads", [(4, 4), (6, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_softcap_backward_matches_reference(dtype, headdim, heads, mask, seqlens, softcap):
    (causal, window_size), (nheads, nheads_kv) = mask, heads
    q, k, v = random_qkv(2, *seqlens, nheads, nheads_kv, headdim, dtype, device="cuda")
    _check_masked(q * 4, k, v, causal, window_size, softcap, f"cap {softcap}")


# Varlen with softcap: the native forward's out and lse (the pair auto runs at head dims 128 / 256), each sequence
# against its dense reference; the mixed lengths (sequences without queries or keys, single rows) and GQA.
@pytest.mark.parametrize("mask", SOFTCAP_MASKS, ids=_mask_id)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_softcap_varlen_backward_matches_reference(headdim, mask):
    from fa3nn.backends.hopper import launch as forward

    causal, window_size = mask
    args, varlen = _varlen_inputs(*VARLEN_CASES["mixed"], 6, 2, headdim, torch.bfloat16, device="cuda")
    args["q"] = args["q"] * 4
    scale, masks = headdim**-0.5, dict(window_size=window_size, softcap=5.0)
    args["out"], args["lse"] = forward(args["q"], args["k"], args["v"], scale, causal, varlen, **masks)
    dq, dk, dv = (_poisoned_like(args[n]) for n in ("q", "k", "v"))
    hopper_bwd.launch(**args, softmax_scale=scale, causal=causal, dq=dq, dk=dk, dv=dv, varlen=varlen, **masks)
    ref = _varlen_reference(args, varlen, causal, scale, upcast=True, **masks)
    pt = _varlen_reference(args, varlen, causal, scale, upcast=False, **masks)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert not got.isnan().any(), f"{name} has NaNs (unwritten rows of the poisoned buffer, or NaN math)"
        assert_error_ratio(got, r, p, f"{name} (varlen, cap 5)")


# The variants change only dQ's path (bulk_dq: shared memory + TMA reduce-add) or the order of neighbouring query
# blocks' GEMMs (overlap), never the order of a sum: dK/dV accumulate the same products in the same order as
# red_dq's, so they must be bitwise equal to its; dQ by the error-ratio rule. Shapes: one query block (1x1: only the
# prologue and, overlap, the after-loop hand-off), a single key (239x1), many ragged steps that reuse both dQ / dS^T
# buffers and (d128, 2 stages) both ring stages (511x1537), and the long case (4224x4224). m128 (128-row query blocks,
# d64) adds zero products (a causal start rounded down to 128 rows, padded rows) to the same sums in the same order,
# so its dK/dV must be bitwise equal too; (200, 300) has a last query block of 72 rows (64-row blocks: one full, one of
# 8), and (130, 130) puts the causal diagonal inside its second block.
VARIANT_SEQLENS = [(1, 1), (239, 1), (511, 1537), (4224, 4224), (200, 300), (130, 130)]
VARIANT_CASES = [(headdim, variant) for headdim in HEADDIMS for variant in hopper_bwd.variants_for(headdim)
                 if variant != "red_dq"]


@pytest.mark.parametrize("headdim,variant", VARIANT_CASES, ids=lambda x: str(x))
@pytest.mark.parametrize("seqlens", VARIANT_SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
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


# In-kernel GQA/MQA (hopper_bwd.NATIVE_GQA's path): one CTA per K/V head walks every query head of its group, so the
# step index, the ring stages and the dQ / dS^T buffers continue across heads, and (causal) each head restarts at the
# key block's first query block, which is past 0 for most key blocks of 511x1537 and 4224x4224. Group 4 (8 query heads
# on 2 K/V heads) and MQA with an odd group (3 query heads on 1). dK/dV sum the whole group in registers in a fixed
# order: bitwise equal run to run, and across variants (which change only dQ's path or the GEMM order of neighbouring
# steps, not a sum's order); they differ from the expansion path's (fp32 sums of per-head bf16 results).
GQA_SEQLENS = [(1, 1), (511, 1537), (4224, 4224)]
GQA_HEADS = [(8, 2), (3, 1)]


@pytest.mark.parametrize("headdim,variant", [(h, v) for h in HEADDIMS for v in hopper_bwd.variants_for(h)],
                         ids=lambda x: str(x))
@pytest.mark.parametrize("heads", GQA_HEADS, ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("seqlens", GQA_SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_gqa_in_kernel_matches_reference(headdim, causal, seqlens, heads, variant):
    nheads, nheads_kv = heads
    (dout, q, k, v, out, lse, scale), (dq, dk, dv) = _check_against_reference(
        torch.bfloat16, headdim, causal, seqlens, variant, nheads=nheads, nheads_kv=nheads_kv)
    assert dk.shape == k.shape and dv.shape == v.shape
    again = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, variant=variant)
    assert torch.equal(dk, again[1]) and torch.equal(dv, again[2]), f"{variant}: GQA dK/dV differ run to run"
    if variant != "red_dq":
        _, dk_red, dv_red = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, variant="red_dq")
        assert torch.equal(dk, dk_red) and torch.equal(dv, dv_red), f"{variant} changed GQA dK/dV vs red_dq"


# The preprocess / postprocess kernels move 16 bytes per access where the tensors allow (the preprocess: out and dout;
# the postprocess: dq; 16-B aligned, strides of multiples of 8 elements) and 2 bytes otherwise. dV does not read
# delta, so it is bitwise the same either way; delta's fp32 sum runs in another order (8 products per lane against 4
# at d128), so dQ and dK may move by rounding (and dQ, summed by fp32 atomics, by its order anyway). A dq whose base
# is only 4-B aligned takes the 2-byte postprocess alone: dK and dV bitwise the default's, every dQ element written.
def _prepost_kernels(call) -> set[str]:
    """Names of the preprocess / postprocess kernels one call launches (torch.profiler)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    names = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    return {kind + ("_vec" if any(f"{kind}_vec_kernel" in n for n in names) else "")
            for kind in ("preprocess", "postprocess") if any(f"flash_bwd_{kind}" in n for n in names)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"{d[0]}_{d[1]}")
@pytest.mark.gpu
@needs_hopper
def test_prepost_access_widths_agree(dims, causal, dtype):
    (dout, q, k, v, out, lse, scale), (dq, dk, dv) = _check_against_reference(dtype, dims[0], causal, (511, 1537), None,
                                                                             headdim_v=dims[1])
    run = functools.partial(hopper_bwd.launch, dout, q, k, v, out, lse, scale, causal)
    assert _prepost_kernels(run) == {"preprocess_vec", "postprocess_vec"}
    assert _prepost_kernels(functools.partial(run, scalar_prepost=True)) == {"preprocess", "postprocess"}
    dq_s, dk_s, dv_s = run(scalar_prepost=True)
    assert torch.equal(dv, dv_s)
    for name, a, b in (("dq", dq, dq_s), ("dk", dk, dk_s)):
        diff = (a.float() - b.float()).abs().max().item()
        assert diff <= b.float().abs().max().item() * 2**-7, f"{name}: the two access widths differ by {diff}"
    backing = torch.full((q.numel() + 2,), float("nan"), dtype=q.dtype, device=q.device)
    dq_offset = backing[2:].view(q.shape)  # 4-B aligned, not 16: the 2-byte postprocess
    assert _prepost_kernels(functools.partial(run, dq=dq_offset)) == {"preprocess_vec", "postprocess"}
    dq_offset.fill_(float("nan"))  # poisoned again: the call below must write every element
    _, dk_offset, dv_offset = run(dq=dq_offset)
    assert torch.equal(dk_offset, dk) and torch.equal(dv_offset, dv)
    assert not dq_offset.isnan().any()
    diff = (dq_offset.float() - dq.float()).abs().max().item()
    assert diff <= dq.float().abs().max().item() * 2**-7, f"dq: a 4-B aligned buffer differs by {diff}"


# dK / dV leave registers as 16-byte row segments (a quad transpose of each 4 x 4 block of packed words) wherever dk
# and dv are 16-B aligned with strides of multiples of 8 elements, else 4 bytes at a time: the same values either
# way, bitwise. 4-B aligned views (the fallback) and the explicit 4-byte form against the default; 239x1 and
# 511x1537 leave keys past seqlen_k in the last key block (rows whose quads shuffle but do not store).
@pytest.mark.parametrize("seqlens", [(239, 1), (511, 1537)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"{d[0]}_{d[1]}")
@pytest.mark.gpu
@needs_hopper
def test_dkdv_store_widths_agree(dims, causal, seqlens):
    (dout, q, k, v, out, lse, scale), (_, dk, dv) = _check_against_reference(torch.bfloat16, dims[0], causal, seqlens,
                                                                             None, headdim_v=dims[1])
    run = functools.partial(hopper_bwd.launch, dout, q, k, v, out, lse, scale, causal)
    _, dk_s, dv_s = run(scalar_dkdv=True)
    assert torch.equal(dk, dk_s) and torch.equal(dv, dv_s), "the 4-byte and 16-byte dK/dV stores differ"
    for name in ("dk", "dv"):
        like = k if name == "dk" else v
        backing = torch.full((like.numel() + 2,), float("nan"), dtype=like.dtype, device=like.device)
        offset = backing[2:].view(like.shape)  # 4-B aligned, not 16: the 4-byte stores
        grads = run(**{name: offset})
        assert torch.equal(grads[1], dk) and torch.equal(grads[2], dv), f"a 4-B aligned {name} changed dK/dV"


# The grid order (hopper_bwd.GRID_ORDERS) only maps CTAs to (key block, K/V head, batch): each CTA computes the same
# thing either way, so dK/dV are bitwise equal between orders; MHA, GQA and MQA, auto picking either order.
@pytest.mark.parametrize("heads", [(4, 4), *GQA_HEADS], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.gpu
@needs_hopper
def test_grid_orders_give_the_same_dk_dv(headdim, causal, heads):
    nheads, nheads_kv = heads
    (dout, q, k, v, out, lse, scale), (_, dk, dv) = _check_against_reference(
        torch.bfloat16, headdim, causal, (511, 1537), None, nheads=nheads, nheads_kv=nheads_kv,
        grid_order="key_blocks_outer")
    for order in ("key_blocks_inner", "key_blocks_outer_per_batch", "auto"):
        _, dk_other, dv_other = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, grid_order=order)
        assert torch.equal(dk, dk_other) and torch.equal(dv, dv_other), f"grid order {order} changed dK/dV"


# The persistent schedule (hopper_bwd.SCHEDULES): few CTAs each chain many tiles, so every barrier phase (K/V per
# tile, kv_free, the ring, the dS^T / dQ buffers numbered across tiles, the dQ writer's step count) runs through tile
# ends; 3 and 7 CTAs over 13 key blocks x 2 K/V heads x batch 3 (78 tiles, uneven per CTA, causal tiles of uneven
# length dealt boustrophedon, GQA groups), plus the SM-count default. Each tile is computed as with one CTA per tile,
# so dK/dV are bitwise equal to per_tile's; dQ (fp32 reduce-adds in another order) within the error-ratio rule.
@pytest.mark.parametrize("headdim,variant", [(h, v) for h in HEADDIMS for v in hopper_bwd.variants_for(h)],
                         ids=lambda x: str(x))
@pytest.mark.parametrize("heads", [(2, 2), (8, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_persistent_schedule_matches_one_cta_per_tile(headdim, variant, heads, causal):
    nheads, nheads_kv = heads
    (dout, q, k, v, out, lse, scale), (dq, dk, dv) = _check_against_reference(
        torch.bfloat16, headdim, causal, (511, 1537), variant, nheads=nheads, nheads_kv=nheads_kv, batch=3,
        schedule="per_tile")
    for max_ctas in (3, 7, None):
        grads = tuple(_poisoned_like(t) for t in (q, k, v))
        hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, *grads, variant=variant, schedule="persistent",
                          max_ctas=max_ctas)
        assert not any(g.isnan().any() for g in grads), f"max_ctas={max_ctas}: an unwritten gradient element"
        assert torch.equal(grads[1], dk) and torch.equal(grads[2], dv), f"max_ctas={max_ctas} changed dK/dV"
        dq_max = dq.float().abs().max().item()
        torch.testing.assert_close(grads[0], dq, atol=1e-3 * dq_max, rtol=1e-2, msg=f"max_ctas={max_ctas}: dq")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_backward_with_native_gqa_runs_the_kernel_on_unexpanded_kv(monkeypatch, causal):
    """The Backend.backward entry point with NATIVE_GQA on: the same dK/dV as launch on the K/V heads themselves
    (bitwise: one kernel), and within the error-ratio rule of the expansion path's reference."""
    from fa3nn.backends.hopper import launch as forward

    q, k, v = random_qkv(2, 700, 900, 8, 2, 128, torch.bfloat16, device="cuda")
    scale = 128**-0.5
    out, lse = forward(q, k, v, scale, causal)
    dout = torch.randn_like(out)
    params = AttnParams(softmax_scale=scale, window=Window.from_args(causal, (-1, -1)), softcap=0.0,
                        deterministic=False)
    monkeypatch.setattr(hopper_bwd, "NATIVE_GQA", True)
    monkeypatch.setattr(hopper_bwd, "KV_PARTS", 1)  # whole groups (auto gives 4 parts here: 32 tiles on 132 SMs)
    dq, dk, dv = hopper_bwd.backward(dout, q, k, v, out, lse, None, params, None)
    _, dk_launch, dv_launch = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal)
    assert torch.equal(dk, dk_launch) and torch.equal(dv, dv_launch)
    ref = _reference_grads(q, k, v, dout, causal, upcast=True)
    pt = _reference_grads(q, k, v, dout, causal, upcast=False)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert_error_ratio(got, r, p, name)


# Multi-head latent attention (q / k 192, v 128; kernels/hopper/flash_bwd_mla.cuh: 64-key blocks, the head dims'
# 64-column panels dealt unevenly to the two consumers): every length of the equal-dims tests, MHA and GQA, dense and
# varlen (empty, single-row and unequal sequences; per tile and persistent), by the error-ratio rule on NaN-poisoned
# gradients; dK / dV bitwise equal run to run (dQ is summed by TMA reduce-adds in varying order).
# Both dense variants: the default (mla_keys, kernels/hopper/flash_bwd_mla_keys.cuh: 128-key blocks, the key split)
# and bulk_dq (the 64-key column split, which varlen runs).
@pytest.mark.parametrize("variant", [None, "bulk_dq"], ids=lambda v: v or "default")
@pytest.mark.parametrize("heads", [(4, 4), (6, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("seqlens", SEQLENS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.gpu
@needs_hopper
def test_mla_backward_matches_reference(dtype, causal, seqlens, heads, variant):
    (dout, q, k, v, out, lse, scale), (dq, dk, dv) = _check_against_reference(
        dtype, MLA[0], causal, seqlens, variant, nheads=heads[0], nheads_kv=heads[1], headdim_v=MLA[1])
    assert dv.shape == v.shape and dv.shape[-1] == MLA[1]
    again = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, variant=variant)
    assert torch.equal(dk, again[1]) and torch.equal(dv, again[2]), "dK / dV differ run to run"


# mla_keys with CTAs chaining tiles (its dS^T / dQ barriers across tiles and steps): 3 CTAs for many tiles, and one
# per SM; GQA, so a tile walks several query heads.
@pytest.mark.parametrize("schedule", [dict(schedule="persistent", max_ctas=3), dict(schedule="persistent")],
                         ids=lambda s: f"ctas{s.get('max_ctas', 'sms')}")
@pytest.mark.parametrize("seqlens", [(113, 203), (1024, 1024), (511, 1537), (4224, 4224)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_mla_keys_persistent_matches_reference(causal, seqlens, schedule):
    (dout, q, k, v, out, lse, scale), (dq, dk, dv) = _check_against_reference(
        torch.bfloat16, MLA[0], causal, seqlens, "mla_keys", nheads=6, nheads_kv=2, headdim_v=MLA[1], **schedule)
    per_tile = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal, variant="mla_keys", schedule="per_tile")
    assert torch.equal(dk, per_tile[1]) and torch.equal(dv, per_tile[2]), "dK / dV differ from one CTA per tile"


# Varlen: both variants, the default (mla_keys, its tiles published by the producer, BwdConfig::kPublishTiles:
# persistent on 3 CTAs walks many published tiles, sequences without keys or queries leave tiles unpublished) and
# bulk_dq.
@pytest.mark.parametrize("variant", [None, "bulk_dq"], ids=lambda v: v or "default")
@pytest.mark.parametrize("schedule", [dict(schedule="per_tile"), dict(schedule="persistent", max_ctas=3)],
                         ids=lambda s: s["schedule"])
@pytest.mark.parametrize("case", list(VARLEN_CASES))
@pytest.mark.parametrize("heads", [(4, 4), (6, 2)], ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.gpu
@needs_hopper
def test_mla_varlen_backward_matches_reference(causal, heads, case, schedule, variant):
    _varlen_case(torch.bfloat16, MLA[0], causal, heads, case, dict(schedule, variant=variant), headdim_v=MLA[1])


@pytest.mark.gpu
@needs_hopper
def test_mla_dq_accum_is_zeroed_over_qs_head_dim():
    """dq_accum comes from torch.empty and the preprocess zeroes it over q's 192 columns (while delta sums over v's
    128): the caching allocator hands the call the block a NaN-filled tensor of dq_accum's shape has just freed
    (dq / dk / dv passed in, so dq_accum is the call's first allocation), and a preprocess zeroing fewer columns would
    leave NaN in dQ."""
    from fa3nn.backends.hopper import launch as forward

    q, k, v = random_qkv(2, 1000, 1000, 4, 4, MLA[0], torch.bfloat16, device="cuda", headdim_v=MLA[1])
    scale = MLA[0] ** -0.5
    out, lse = forward(q, k, v, scale, False)
    dout = torch.randn_like(out)
    dq, dk, dv = (_poisoned_like(t) for t in (q, k, v))
    rows = hopper_bwd.workspace_shape(2, 1000, hopper_bwd.LIBRARY.require().fa3nn_hopper_bwd_block_m(), False)[1]
    junk = torch.full((2, 4, rows, MLA[0]), float("nan"), dtype=torch.float32, device="cuda")
    del junk
    hopper_bwd.launch(dout, q, k, v, out, lse, scale, False, dq=dq, dk=dk, dv=dv)
    assert not dq.isnan().any(), "dq_accum was not zeroed over every column of q's head dim"
    ref = _reference_grads(q, k, v, dout, False, upcast=True)
    pt = _reference_grads(q, k, v, dout, False, upcast=False)
    for name, got, r, p in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, pt):
        assert_error_ratio(got, r, p, name)
