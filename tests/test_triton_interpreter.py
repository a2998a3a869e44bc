"""The Triton kernels on the CPU, under TRITON_INTERPRET=1: forward and backward, fp16 and fp32, every feature.

Triton reads TRITON_INTERPRET when a function is decorated, its own standard library (tl.sum, tl.zeros, ...)
included, so the variable must be set before triton is first imported: this module sets it at import, on machines
without CUDA (on a GPU machine it would turn the compiled kernels of the GPU tests in the same process into
interpreted ones; run it there as `CUDA_VISIBLE_DEVICES= pytest tests/test_triton_interpreter.py`). The module
fixture also sets FA3NN_TRITON_CPU=1, the backend's opt-in for CPU tensors, only while these tests run, so other
tests' `backend="auto"` calls never land in the interpreter.

The interpreter's bf16 tl.dot is wrong (numpy has no bf16), so bf16 is covered by the GPU tests. Its fp32 tl.dot is
Triton's compiled FMA chain here (fa3nn.testing.fma_dot), not the CPU BLAS, so fp32 results do not depend on the
machine's BLAS. Shapes are small but cross several of the interpreter's 16/32-row tiles, including partial ones
(configs.INTERPRETER).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

import numpy as np
import pytest
import torch

if torch.cuda.is_available():
    pytest.skip("interpreter tests run on CPU-only machines (or with CUDA_VISIBLE_DEVICES=)", allow_module_level=True)
if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from test_fa3_compat import check_seqused  # noqa: E402
from test_row_spans import SPANS, check_span  # noqa: E402
from test_triton_helpers import check_dense, check_varlen  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.backends.base import AttnCall, Varlen  # noqa: E402
from fa3nn.backends.triton import TritonBackend  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.testing import assert_error_ratio, attention_ref, random_qkv  # noqa: E402
from fa3nn.testing.fma_dot import compiled_fp32_dots, fma_chain  # noqa: E402

DTYPES = [torch.float16, torch.float32]


@pytest.fixture(scope="module", autouse=True)
def interpreter():
    from triton.runtime.interpreter import InterpretedFunction

    if os.environ.get("TRITON_INTERPRET") != "1" or not isinstance(triton.language.zeros, InterpretedFunction):
        pytest.fail("triton was imported before TRITON_INTERPRET=1 was set; set it in the environment (or in "
                    "tests/conftest.py) before anything imports triton", pytrace=False)
    os.environ["FA3NN_TRITON_CPU"] = "1"
    with compiled_fp32_dots():  # fp32 dots rounded as Triton's compiled FMA chain, not as this machine's BLAS
        yield
    del os.environ["FA3NN_TRITON_CPU"]


# (batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, causal, window, softcap)
DENSE_CASES = {
    "one-token": (1, 1, 1, 1, 1, 32, False, (-1, -1), 0.0),
    "odd-noncausal": (2, 17, 45, 2, 2, 32, False, (-1, -1), 0.0),
    "causal-more-queries": (1, 45, 17, 2, 1, 32, True, (-1, -1), 0.0),  # leading rows attend nothing
    "causal-more-keys-gqa": (1, 33, 70, 4, 2, 64, True, (-1, -1), 0.0),
    "window-both": (1, 70, 70, 2, 1, 48, False, (9, 4), 0.0),  # MQA, head dim padded 48 -> 64 (TMA test: 64)
    "window-left-causal": (1, 64, 96, 2, 2, 32, True, (20, -1), 0.0),
    "window-right-only": (1, 40, 50, 2, 2, 32, False, (-1, 3), 0.0),
    "window-left-only": (1, 50, 40, 2, 2, 32, False, (6, -1), 0.0),
    "softcap": (2, 30, 41, 2, 2, 32, False, (-1, -1), 2.0),
    "softcap-causal-gqa": (1, 41, 30, 4, 1, 32, True, (-1, -1), 5.0),
    # a cap far above the scores changes none of them; the exp-form tanh put ~softcap * 6e-8 into each (s58's fuzz)
    "softcap-huge": (1, 33, 40, 2, 1, 64, True, (-1, -1), 3e4),  # (within fp16: the fp16 PyTorch side overflows at 1e6)
    "many-queries-one-key": (1, 239, 1, 1, 1, 32, False, (-1, -1), 0.0),
}


# With one key every softmax is exactly 1 and the exact dS cancels to exactly 0, so pt's error is 0 and the bound is
# the noise floor alone (2.4e-8 in fp32). A kernel computing delta = rowsum(dO * O) (FlashAttention's algorithm)
# leaves a residue of one fp32 rounding of |dO . V| (~1e-7) there; in fp16 the floor (2.4e-4) covers it. In fp32,
# check_single_key_fp32 holds dq and dk to a worst-case rounding bound instead (measured: 1.4% of that bound).
SINGLE_KEY = {"one-token", "many-queries-one-key"}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", DENSE_CASES, ids=str)
def test_dense(case, dtype):
    if case in SINGLE_KEY and dtype == torch.float32:
        check_single_key_fp32(DENSE_CASES[case])  # the rule's bound is the noise floor alone here: see below
        return
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, dtype, "cpu", causal=causal, window=window, softcap=softcap)


def check_single_key_fp32(case):
    """fp32, one key: out and dv by the error-ratio rule; lse, dq and dk by worst-case rounding bounds.

    lse is then the key's score itself: one fp32 dot of headdim products times the scale, which the rule compares
    at the level of single ulps (the kernel's FMA chain 5.9e-7 from the truth against plain fp32 PyTorch's 2.4e-7 on
    an AVX2 machine's MKL, 4.1e-7 on an AVX-512 one: benchmarks/NOTES.md "fp32 backward"). Recursive summation
    bounds it: |lse - s| <= scale * 2 * headdim * eps * sum_d |Q_d K_d| + 2 * eps * |s| (the product by the scale,
    the rounding to fp32); a wrong lse (a missing scale, log2 units) is off by far more.

    With one key P = 1, dS = dP - delta, and the kernel's delta = rowsum(dO * O) differs from dP = dO . V only by the
    order of two fp32 sums of headdim products: |dS_i| <= 2 * headdim * eps * sum_d |dO_id V_d| (recursive
    summation). Then |dq_i| <= scale * |dS_i| * max|K| and |dk| <= scale * sum_i |dS_i| |Q_i|. A wrong kernel (any
    O(1) dS) is far above this bound."""
    batch, sq, sk, h, hk, d, causal, window, softcap = case
    q, k, v = random_qkv(batch, sq, sk, h, hk, d, torch.float32, requires_grad=True)
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True, backend="triton")
    out_ref, _ = attention_ref(q, k, v, causal=causal)
    out_pt, _ = attention_ref(q, k, v, causal=causal, upcast=False, reorder_ops=True)
    assert_error_ratio(out, out_ref, out_pt, "out")
    eps = torch.finfo(torch.float32).eps
    scale = d**-0.5
    k_rows = k.detach().repeat_interleave(h // hk, dim=2)  # (b, 1, h, d): the one key per query head
    products = q.detach().double() * k_rows.double()  # (b, sq, h, d)
    score = (products.sum(-1) * scale).transpose(1, 2)  # (b, h, sq), exact in fp64
    lse_bound = (scale * 2 * d * eps * products.abs().sum(-1)).transpose(1, 2) + 2 * eps * score.abs()
    assert ((lse.double() - score).abs() <= lse_bound).all(), f"lse {(lse.double() - score).abs().max():.3e} over"
    dout = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    assert_error_ratio(dv, *(torch.autograd.grad(o, v, dout)[0] for o in (out_ref, out_pt)), "dv")
    v_rows = v.detach().repeat_interleave(h // hk, dim=2)  # (b, 1, h, d): the one key's V per query head
    ds_bound = 2 * d * eps * (dout.abs() * v_rows.abs()).sum(-1)  # (b, sq, h)
    dq_bound = scale * ds_bound.unsqueeze(-1) * k.detach().abs().amax()
    dk_bound = scale * (ds_bound.unsqueeze(-1) * q.detach().abs()).sum(1).amax()
    assert (dq.abs() <= dq_bound).all(), f"dq {dq.abs().max().item():.3e} over its rounding bound"
    assert dk.abs().max() <= dk_bound, f"dk {dk.abs().max().item():.3e} over its bound {dk_bound.item():.3e}"


def _tie_inputs():
    """A row (1, 2^-12 x 4, 0, ...) times itself: products 1 and four of 2^-24, half an ulp of 1 each."""
    row = torch.zeros(16, dtype=torch.float32)
    row[0], row[1:5] = 1.0, 2.0**-12
    return row, row


def test_fma_chain_rounds_each_product_in_k_order():
    """Every FMA after the first rounds 1 + 2^-24 back to 1 (ties to even): the chain gives exactly 1, where one
    rounding of the whole sum gives 1 + 2^-22; K reversed, the small products add exactly first and the same
    terms give 1 + 2^-22."""
    a, b = (x.numpy()[None, :5] for x in _tie_inputs())
    zero = np.zeros((1, 1), dtype=np.float32)
    assert fma_chain(a, b.T, zero)[0, 0] == 1.0
    assert fma_chain(a[:, ::-1], b.T[::-1], zero)[0, 0] == np.float32(1.0 + 2.0**-22)


@triton.jit
def _dot_16(A, B, C):
    offs = tl.arange(0, 16)
    tile = offs[:, None] * 16 + offs[None, :]
    tl.store(C + tile, tl.dot(tl.load(A + tile), tl.load(B + tile), input_precision="ieee"))


def test_interpreter_fp32_dot_is_the_fma_chain(monkeypatch):
    """The fixture's patch is live: the kernel's fp32 dot calls fma_chain (counted: on an AVX-512 machine
    OpenBLAS's 16x16 sgemm happens to sum in the same order, so the values alone could not tell) and returns its
    result bit for bit."""
    from fa3nn.testing import fma_dot

    calls = []
    monkeypatch.setattr(fma_dot, "fma_chain", lambda *args: calls.append(1) or fma_chain(*args))
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    c = torch.empty(16, 16)
    _dot_16[(1,)](a, b, c)
    assert calls == [1]
    assert torch.equal(c, torch.from_numpy(fma_chain(a.numpy(), b.numpy(), np.zeros((16, 16), np.float32))))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_op_lse_dtype(dtype):
    """fa3nn::fwd through the Triton kernels returns the lse dtype its fake promises (saved_lse_dtype: float64 for
    float32 inputs, float32 for 16-bit ones); the user's lse is float32 either way."""
    from fa3nn.backends.base import saved_lse_dtype
    from fa3nn.ops import attention_forward

    q, k, v = random_qkv(1, 20, 37, 2, 1, 32, dtype)
    _, lse_op = attention_forward(q, k, v, None, None, 20, 37, 32**-0.5, -1, 0, 0.0, False, "triton")
    assert lse_op.dtype == saved_lse_dtype(dtype) == (torch.float64 if dtype == torch.float32 else torch.float32)
    _, lse = flash_attn_func(q, k, v, causal=True, return_lse=True, backend="triton")
    assert lse.dtype == torch.float32 and torch.equal(lse, lse_op.float())


@pytest.mark.parametrize("orientation", ["auto", "1"], ids=["default-orientation", "query-major"])
@pytest.mark.parametrize("case", ["causal-more-queries", "window-both", "softcap-causal-gqa"], ids=str)
def test_atomic_dq_path(case, orientation, monkeypatch):
    """FA3NN_TRITON_ATOMIC_DQ: dQ added by atomics from the dK/dV kernel (opt-in; the default is the dQ kernel), with
    the fused kernel's default (key-major) scores and with query-major ones (dQ = dS K without a transpose)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "ATOMIC_DQ", True)
    monkeypatch.setattr(launch, "DKDV_QUERY_MAJOR", orientation)
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("case", ["causal-more-queries", "causal-more-keys-gqa", "window-both", "softcap"], ids=str)
def test_unmasked_row_stats_is_bitwise_the_default(case, monkeypatch):
    """FA3NN_TRITON_UNMASKED_ROW_STATS (the default): the dK/dV kernel's unmasked run drops row checks that cannot
    fire there (every row exists and attends a key), so dq, dk, dv must equal the checked path's bit for bit; the
    cases include rows that attend nothing (lse = -inf) and ragged blocks."""
    from fa3nn.backends.triton import launch

    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    monkeypatch.setattr(launch, "UNMASKED_ROW_STATS", False)
    opts = dict(causal=causal, window_size=window, softcap=softcap)
    (q, k, v, grad_out), default = check_dense(batch, sq, sk, h, hk, d, torch.float32, "cpu", causal=causal,
                                               window=window, softcap=softcap)
    monkeypatch.setattr(launch, "UNMASKED_ROW_STATS", True)
    out = flash_attn_func(q, k, v, **opts, backend="triton")
    for name, a, b in zip(("dq", "dk", "dv"), default, torch.autograd.grad(out, (q, k, v), grad_out)):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("unmasked", [False, True])
def test_unmasked_row_stats_varlen(unmasked, monkeypatch):
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "UNMASKED_ROW_STATS", unmasked)
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_headdim_v_differs(dtype):
    check_dense(1, 20, 37, 2, 1, 32, dtype, "cpu", causal=True, headdim_v=64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lse_gradient(dtype):
    check_dense(1, 29, 52, 2, 1, 32, dtype, "cpu", causal=True, lse_grad=True)  # sk > sq: every row attends


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (7, 2))], ids=str)
def test_varlen(causal, window, dtype):
    check_varlen(3, 40, 57, 2, 1, 32, dtype, "cpu", causal=causal, window=window)


def test_seqused_slots():
    """FlashAttention-3's seqused (fa3nn.slots): slots split into sequences with queries and no keys and the
    reverse, which the varlen kernels must handle."""
    q, k, v = random_qkv(3, 40, 57, 2, 1, 32, torch.float32)
    used_q, used_k = torch.tensor([40, 0, 17], dtype=torch.int32), torch.tensor([9, 57, 0], dtype=torch.int32)
    check_seqused(q, k, v, used_q, used_k, "packed", True, (-1, -1), "triton")


@pytest.mark.parametrize("span", ["both_sides", "empty_cover"])
def test_rows_outside_every_sequence(span):
    """cu_seqlens leaving packed rows out (fa3nn.spans): the Triton kernels on the covered rows, the rest zeros."""
    check_span(SPANS[span], backend="triton", causal=True)


def test_varlen_atomic_dq_path(monkeypatch):
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "ATOMIC_DQ", True)
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic-dq", "dq-kernel"])
def test_very_negative_scores_with_a_partial_key_block(atomic, monkeypatch):
    """The dK/dV kernel's unmasked run of query blocks (_query_phases' [full_lo, full_hi)) must not cover a partial
    key block: there the columns past seqlen_k load K as 0, score 0, and P = exp(0 - lse) overflows once every real
    score is below about -88 (here lse is about -138: q = -5, k = +5, d = 32), so the atomic dQ got dS * 0 = inf * 0 =
    NaN. 37 keys leave the last key block partial for every interpreter tile. Out and every gradient finite and
    within the error-ratio rule (dq, a near-cancellation of max 5e-3: ~5e-4 off where fp16 PyTorch is ~6e-4 off); the
    default dQ kernel never had the problem and is checked alike."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "ATOMIC_DQ", atomic)
    q = (-5 + 0.01 * torch.randn(1, 40, 1, 32)).half().requires_grad_()
    k = (5 + 0.01 * torch.randn(1, 37, 1, 32)).half().requires_grad_()
    v = torch.randn(1, 37, 1, 32).half().requires_grad_()
    out, lse = flash_attn_func(q, k, v, return_lse=True, backend="triton")
    assert lse.max() < -100  # every score far below exp's range: exp(0 - lse) overflows float32
    out_ref, _ = attention_ref(q, k, v)
    out_pt, _ = attention_ref(q, k, v, upcast=False, reorder_ops=True)
    assert_error_ratio(out, out_ref, out_pt, "out")
    dout = torch.randn_like(out)
    grads, grads_ref, grads_pt = (torch.autograd.grad(o, (q, k, v), dout) for o in (out, out_ref, out_pt))
    for name, g, g_ref, g_pt in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt):
        assert torch.isfinite(g).all(), name
        assert_error_ratio(g, g_ref, g_pt, name)


# window_size takes sides up to 2**31 - 1 (fa3nn.checks.WINDOW_MAX). The kernels add them to row and column indices
# in int32: unclamped, m0 + diag + right (and m0 + diag - left with more queries than keys) wrapped around and rows
# attended nothing or the wrong keys (out off by ~1, lse -inf, NaN dK/dV). The launchers bound each side by the
# sequence lengths (fa3nn.masks.Window.kernel_sides), which leaves the mask as it was.
WIDEST = 2**31 - 1


@pytest.mark.parametrize("window", [(WIDEST, WIDEST), (WIDEST, 0), (0, WIDEST), (-1, WIDEST - 60)], ids=str)
def test_windows_up_to_int32_max(window):
    check_dense(1, 40, 50, 2, 1, 32, torch.float16, "cpu", window=window)
    check_dense(1, 50, 40, 2, 1, 32, torch.float16, "cpu", window=window)


def test_windows_up_to_int32_max_varlen():
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", window=(WIDEST, WIDEST))


def _split_dkdv(monkeypatch):
    """The dK/dV head-dim split (default from padded head dim 256) for every head dim (these shapes are small): two
    dK/dV programs per key block, each accumulating half of the columns."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_SPLIT_D", 2)
    monkeypatch.setattr(launch, "DKDV_SPLIT_MIN_BLOCK_D", 16)
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "joint")  # not the output split (the d256 default)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-keys-gqa", "window-both", "softcap-causal-gqa"],
                         ids=str)
def test_dkdv_split_head_dim(case, dtype, monkeypatch):
    """The head-dim split of the dK/dV kernel; window-both's head dim 48 is padded to 64, so its second
    half holds the padded columns (masked on load and store)."""
    _split_dkdv(monkeypatch)
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, dtype, "cpu", causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-keys-gqa", "window-both"], ids=str)
def test_dkdv_split_with_atomic_dq(case, monkeypatch):
    """The opt-in atomic dQ with the head-dim split: each part adds dQ's columns of its part (per-element atomics
    here; the TMA reduce path needs a GPU). window-both's head dim 48 pads to 64: its second part is 16 real and 16
    padded columns."""
    from fa3nn.backends.triton import launch

    _split_dkdv(monkeypatch)
    monkeypatch.setattr(launch, "ATOMIC_DQ", True)
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-keys-gqa", "window-both", "softcap-causal-gqa"],
                         ids=str)
def test_output_split_with_atomic_dq(case, monkeypatch):
    """The opt-in atomic dQ with the output split (the d256 default): the dV kernel, then the dK kernel adding dQ
    ("dk_dq", per-element atomics here; the TMA reduce path needs a GPU), and no dQ kernel."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split")
    monkeypatch.setattr(launch, "ATOMIC_DQ", True)
    assert launch.key_block_kinds(64, 64, True, False, 512) == ("dv", "dk_dq")
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)


def test_dkdv_split_head_dim_varlen_and_headdim_v(monkeypatch):
    _split_dkdv(monkeypatch)
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)
    check_dense(1, 20, 37, 2, 1, 32, torch.float16, "cpu", causal=True, headdim_v=64)


def test_dkdv_split_at_wide_head_dims(monkeypatch):
    """Head dim 160 pads to 256: with the output split off, the backward runs the head-dim split dK/dV kernel, its
    second half 32 real and 96 padded columns (the default there is the output split, tested below)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "joint")
    assert launch.dkdv_kind(256, 256, atomic_dq=False) == "dkdv_split"
    assert launch.key_block_kinds(256, 256, False, True, 2048) == ("dkdv_split",)
    check_dense(1, 20, 37, 2, 1, 160, torch.float16, "cpu", causal=True)


def test_dkdv_split_rule(monkeypatch):
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_SPLIT_D", 2)
    assert launch.dkdv_split(256, 256, atomic_dq=False) == 2
    assert launch.dkdv_kind(256, 256, atomic_dq=True) == "fused_split"  # each part adds its own dQ columns
    assert launch.dkdv_split(256, 512, atomic_dq=True) == 1  # dQ parts follow Q's width: V's must match
    monkeypatch.setattr(launch, "DKDV_SPLIT_D", "1")
    assert launch.dkdv_kind(256, 256, atomic_dq=False) == "dkdv"
    assert launch.dkdv_kind(256, 256, atomic_dq=True) == "fused"
    monkeypatch.setattr(launch, "DKDV_SPLIT_D", 2)
    assert launch.dkdv_split(128, 128, atomic_dq=False) == 1  # below DKDV_SPLIT_MIN_BLOCK_D
    for bad in (3, "yes"):
        monkeypatch.setattr(launch, "DKDV_SPLIT_D", bad)
        with pytest.raises(ValueError, match=f"FA3NN_TRITON_DKDV_SPLIT_D={bad}: use 1"):
            launch.dkdv_split(256, 256, atomic_dq=False)


def test_deterministic_backward_is_bitwise_repeatable():
    (q, k, v, grad_out), first = check_dense(1, 37, 53, 4, 2, 32, torch.float32, "cpu", causal=True,
                                             deterministic=True)
    out = flash_attn_func(q, k, v, causal=True, deterministic=True, backend="triton")
    second = torch.autograd.grad(out, (q, k, v), grad_out)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def _call(device="cpu", dtype=torch.float16, headdim=64, nheads_kv=2):
    return AttnCall(device, None, dtype, headdim, headdim, 4, nheads_kv, False, Window(), 0.0, False)


def test_refusals_name_the_reason():
    backend = TritonBackend()
    assert backend.refusal(_call(), backward=True) is None
    assert "interpreter" in backend.refusal(_call(dtype=torch.bfloat16), False)
    assert "head dim 512" in backend.refusal(_call(headdim=512), False)
    # V's head dim over the limit with Q's within it: the reason names v, not a "head dim" the user's q doesn't have
    wide_v = dataclasses.replace(_call(headdim=64), headdim_v=512)
    assert "head dim 512 of v is over 256" in backend.refusal(wide_v, False)
    assert "head dim 512 of q/k is over 256" in backend.refusal(dataclasses.replace(wide_v, headdim=512), False)
    assert "multiple" in backend.refusal(_call(nheads_kv=3), False)
    del os.environ["FA3NN_TRITON_CPU"]
    try:
        assert "TRITON_INTERPRET=1" in backend.refusal(_call(), False)
    finally:
        os.environ["FA3NN_TRITON_CPU"] = "1"


@pytest.mark.parametrize("case", ["causal-more-keys-gqa", "window-both", "softcap"], ids=str)
def test_tma_descriptor_path(case, monkeypatch):
    """The forward's tensor-descriptor path (used on Hopper), forced on under the interpreter: rows past a
    sequence's end come from the next sequence here, unlike the pointer path's masked loads."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "0")  # the (rows, heads * dim) views: batched ones are tested below
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    q, k, v = (torch.randn(2, n, heads, 64) for n, heads in ((sq, h), (sk, hk), (sk, hk)))
    assert launch._tma_views(q, k, v, shape=launch._Shape(q, k, v, _params(causal, window, softcap), None)) is not None
    check_dense(2, sq, sk, h, hk, 64, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


def test_tma_descriptor_path_varlen(monkeypatch):
    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)


@pytest.mark.parametrize("case", ["causal-more-keys-gqa", "window-both", "softcap"], ids=str)
def test_dq_tma_loads(case, monkeypatch):
    """The dQ kernel's opt-in descriptor loads of K and V (FA3NN_TRITON_DQ_TMA=1), forced on under the interpreter."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "0")  # the (rows, heads * dim) views: batched ones are tested below
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(2, sq, sk, h, hk, 64, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("batched", [False, True], ids=["rows", "batched"])
def test_dq_tma_loads_zero_the_next_sequences_rows(batched, monkeypatch):
    """Through (rows, heads * dim) descriptors, K/V rows past a sequence's end are the next sequence's: NaN there
    must not reach dQ (K enters dS K, V enters dP; the masked run zeroes both; through the batched views the copy
    engine does). Batch 1 is all NaN; batch 0's gradients must match the reference of batch 0 alone (37 keys: the
    last 16-key block reaches 11 rows into batch 1)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1" if batched else "0")
    q, k, v = (torch.randn(2, n, 2, 64, dtype=torch.float16) for n in (29, 37, 37))
    k[1] = float("nan")
    v[1] = float("nan")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attn_func(*leaves, causal=True, backend="triton")
    out[0].float().sum().backward()
    ref = [t[:1].clone().requires_grad_() for t in (q, k, v)]
    flash_attn_func(*ref, causal=True, backend="reference").float().sum().backward()
    for got, want in zip(leaves, ref):
        assert torch.isfinite(got.grad[0]).all()
        torch.testing.assert_close(got.grad[:1].float(), want.grad.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("orientation", ["0", "1"], ids=["key-major", "query-major"])
@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-queries", "window-both", "softcap-causal-gqa"], ids=str)
def test_dkdv_score_orientations(case, orientation, monkeypatch):
    """Both score orientations of the dK/dV kernel (launch.DKDV_QUERY_MAJOR) through the error-ratio rule: the default
    picks query-major at head dims <= 64 (every other dense case here) and key-major at most larger shapes
    (configs.QUERY_MAJOR), so each is forced here (fp16; fp32 in the agreement test below)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_QUERY_MAJOR", orientation)
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


def _grads_by_switch(case, switch, values, monkeypatch) -> dict:
    """fp32 gradients (dq, dk, dv) of one dense case, the same inputs, under each value of the launcher switch
    `launch.<switch>`."""
    from fa3nn.backends.triton import launch

    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    q, k, v = random_qkv(batch, sq, sk, h, hk, d, torch.float32, requires_grad=True)
    grad_out = torch.randn(*q.shape[:-1], v.shape[-1])
    grads = {}
    for value in values:
        monkeypatch.setattr(launch, switch, value)
        out = flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap, backend="triton")
        grads[value] = torch.autograd.grad(out, (q, k, v), grad_out)
    return grads


@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-queries", "window-both", "softcap-causal-gqa"], ids=str)
def test_dkdv_score_orientations_agree_fp32(case, monkeypatch):
    """In fp32 the two orientations multiply the same products: dK and dV agree to a few fp32 roundings (the
    interpreter's: bitwise), and dQ (the dQ kernel's, independent of the orientation) exactly."""
    grads = _grads_by_switch(case, "DKDV_QUERY_MAJOR", ("0", "1"), monkeypatch)
    for name, key_major, query_major in zip(("dq", "dk", "dv"), grads["0"], grads["1"]):
        scale = key_major.abs().max().clamp_min(1e-30)
        assert ((key_major - query_major).abs().max() / scale) <= 8 * torch.finfo(torch.float32).eps, name


@pytest.mark.parametrize("orientation", ["0", "1"], ids=["key-major", "query-major"])
@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-queries", "window-both", "softcap-causal-gqa"], ids=str)
def test_output_split(case, orientation, monkeypatch):
    """FA3NN_TRITON_DKDV_OUTPUTS=split: a dV kernel and a dK kernel instead of the one dK/dV kernel, in both score
    orientations, through the error-ratio rule (outputs poisoned: a kernel that skips its output fails)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "POISON_OUTPUTS", True)
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split")
    monkeypatch.setattr(launch, "DKDV_QUERY_MAJOR", orientation)
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(batch, sq, sk, h, hk, d, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


def test_output_split_varlen_headdim_v_and_wide_head_dims(monkeypatch):
    """The split with cu_seqlens, with V's head dim unlike Q's, and at a head dim that pads to 256 (where it replaces
    the head-dim split)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "POISON_OUTPUTS", True)
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split")
    assert launch.key_block_kinds(256, 256, False, True, 4096) == ("dv", "dk")
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)
    check_dense(1, 20, 37, 2, 1, 32, torch.float16, "cpu", causal=True, headdim_v=64)
    check_dense(1, 20, 37, 2, 1, 160, torch.float16, "cpu", causal=True)


@pytest.mark.parametrize("orientation", ["0", "1"], ids=["key-major", "query-major"])
@pytest.mark.parametrize("case", ["causal-more-keys-gqa", "window-both", "softcap"], ids=str)
def test_output_split_is_bitwise_the_joint_kernel(case, orientation, monkeypatch):
    """With the same tile and orientation, the dV kernel and the dK kernel form the same products in the same order
    as the one dK/dV kernel: dq, dk, dv equal bit for bit (fp32)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_QUERY_MAJOR", orientation)
    grads = _grads_by_switch(case, "DKDV_OUTPUTS", ("joint", "split"), monkeypatch)
    for name, joint, split in zip(("dq", "dk", "dv"), grads["joint"], grads["split"]):
        assert torch.equal(joint, split), name


def test_output_split_choice(monkeypatch):
    from fa3nn.backends.triton import configs, launch

    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split")
    assert launch.key_block_kinds(128, 128, False, False, 8192) == ("dv", "dk")
    assert launch.key_block_kinds(128, 128, True, False, 8192) == ("dv", "dk_dq")  # the dK kernel adds dQ
    assert set(configs.OUTPUT_SPLIT_KINDS) == {"dv", "dk", "dk_dq"}
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "joint")
    assert launch.key_block_kinds(256, 256, False, False, 8192) == ("dkdv_split",)
    assert launch.key_block_kinds(256, 256, True, False, 8192) == ("fused_split",)
    assert launch.key_block_kinds(128, 128, True, False, 8192) == ("fused",)
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "auto")
    assert launch.key_block_kinds(256, 256, False, True, 2048) == ("dv", "dk")  # measured +12..+23% at d256
    assert launch.key_block_kinds(128, 128, False, False, 8192) == ("dkdv",)  # and 0.70-0.83x at d128
    for block_d, causal in configs.OUTPUT_SPLIT:
        for bucket, seqlen in enumerate(configs.BUCKET_SEQLENS):
            split = configs.OUTPUT_SPLIT[(block_d, causal)][bucket]
            assert (launch.key_block_kinds(block_d, block_d, False, causal, seqlen) == ("dv", "dk")) == split
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "yes")
    with pytest.raises(ValueError, match="FA3NN_TRITON_DKDV_OUTPUTS=yes"):
        launch.key_block_kinds(128, 128, False, False, 8192)


def _pinned_key_block_tiles():
    """Every distinct (kind, head dim, causal, tile, orientation, descriptor loads) the default backward's key-block
    kernel runs with on a GPU (configs.PINNED over the sequence buckets, with configs.QUERY_MAJOR's orientation and
    configs.TMA_LOADS["dkdv"]'s loads)."""
    from fa3nn.backends.triton import configs, launch

    cases = {}
    for block_d in (64, 128, 256):
        for causal in (False, True):
            for seqlen in configs.BUCKET_SEQLENS:  # the launcher's own choices of kernel and orientation
                for kind in launch.key_block_kinds(block_d, block_d, False, causal, seqlen):
                    tile = configs.pinned(kind, block_d, causal, seqlen)
                    query_major = launch.dkdv_query_major(kind, block_d, causal, seqlen)
                    tma = launch.tma_loads(kind, block_d, causal, seqlen)
                    cases[(kind, block_d, causal, tile, query_major, tma)] = None
                    if tma and kind == "dkdv":  # where the call cannot have descriptors (configs.POINTER_FALLBACK)
                        tile = configs.pinned(kind, block_d, causal, seqlen, pointers=True)
                        query_major = launch.dkdv_query_major(kind, block_d, causal, seqlen, pointers=True)
                        cases[(kind, block_d, causal, tile, query_major, False)] = None
    return list(cases)


@pytest.mark.parametrize("kind, headdim, causal, tile, query_major, tma", _pinned_key_block_tiles(), ids=str)
def test_pinned_key_block_tiles(kind, headdim, causal, tile, query_major, tma, monkeypatch):
    """The GPU's dK/dV tiles (not the interpreter's small ones) on ragged lengths: 150 queries and 200 keys leave a
    partial block of every tile's queries and keys, so the masked runs of each pinned tile shape are checked here
    (through descriptors where the GPU's loads are: the interpreter runs them with FA3NN_TRITON_TMA=1)."""
    from fa3nn.backends.triton import configs, launch

    monkeypatch.setitem(configs.OVERRIDES, kind, tile)
    monkeypatch.setattr(launch, "DKDV_QUERY_MAJOR", "1" if query_major else "0")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1" if tma else "0")
    if tma:
        monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_OUTPUTS", "split" if kind in configs.OUTPUT_SPLIT_KINDS else "joint")
    check_dense(1, 150, 200, 2, 1, headdim, torch.float16, "cpu", causal=causal)


@pytest.mark.parametrize("headdim, causal, tma_env, switches, batched, expected", [
    (128, True, "1", "auto", "auto", {"fwd": False, "dkdv": False, "dq": False}),
    (96, True, "1", "auto", "auto", {"fwd": True, "dkdv": True, "dq": True}),
    (128, True, "0", "auto", "auto", {"fwd": True, "dkdv": True, "dq": True}),
    (128, True, "1", "0", "auto", {"fwd": False, "dkdv": True, "dq": True}),
    (64, True, "1", "1", "auto", {"fwd": False, "dkdv": False, "dq": False}),
    (256, False, "1", "auto", "1", {"fwd": False, "dv": False, "dk": False, "dq": False}),
    (256, False, "1", "auto", "0", {"fwd": True, "dv": True, "dk": False, "dq": True}),
], ids=["descriptors", "padded-head-dim", "descriptors-off", "switched-off", "forced-where-not-measured",
        "d256-batched", "d256-rows-views"])
def test_tiles_follow_the_loads_the_call_gets(headdim, causal, tma_env, switches, batched, expected, monkeypatch):
    """configs.TMA_LOADS's d128 "dkdv" tiles and causal-short "dq" tile, and every forward tile, were measured
    through descriptors; a call that does not get them (a head dim padded to the block, FA3NN_TRITON_TMA=0,
    FA3NN_TRITON_DKDV_TMA / FA3NN_TRITON_DQ_TMA=0, a GPU or Triton without them) takes configs.POINTER_FALLBACK's
    tiles (and orientation) instead: launch passes `pointers` to the tile choice exactly then (forcing descriptors
    where the table has none keeps the table's tiles). The d256 forward and dQ tiles (configs.BATCHED_ONLY) also
    fall back where the call has only the (rows, heads * dim) views (FA3NN_TRITON_TMA_BATCHED=0, varlen)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", switches)
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", switches)
    monkeypatch.setattr(launch, "TMA_BATCHED", batched)

    seen = {}
    original = launch._launcher

    def record(kind, kernel, shape, tma=False, pointers=False):
        seen[kind] = pointers
        return original(kind, kernel, shape, tma, pointers)

    monkeypatch.setenv("FA3NN_TRITON_TMA", tma_env)
    monkeypatch.setattr(launch, "_launcher", record)
    q, k, v = (torch.randn(1, 40, 2, headdim, dtype=torch.float16, requires_grad=True) for _ in range(3))
    flash_attn_func(q, k, v, causal=causal, backend="triton").sum().backward()
    assert seen == expected


def test_dkdv_orientation_and_load_choices():
    """configs.QUERY_MAJOR and configs.TMA_LOADS["dkdv"] decide for the "dkdv" kernel only: query-major scores at
    head dims <= 64, descriptor loads at d128."""
    from fa3nn.backends.triton import launch

    major, tma = launch.dkdv_query_major, launch.tma_loads
    assert major("dkdv", 64, False, 512) and major("dkdv", 32, True, 16384) and major("dkdv", 64, True, 1024)
    assert not major("dkdv", 128, True, 1024) and not major("dkdv", 128, False, 2048)
    assert not major("fused", 64, False, 2048) and not major("dkdv_split", 256, True, 2048)
    assert tma("dkdv", 128, False, 512) and tma("dkdv", 128, True, 16384) and not tma("dkdv", 64, True, 8192)
    assert not tma("dv", 128, False, 8192) and not tma("dkdv_split", 256, False, 8192)
    # by pointers where the call cannot have descriptors: the orientation measured that way (configs.POINTER_FALLBACK)
    assert major("dkdv", 128, True, 4096, pointers=True) and not major("dkdv", 128, True, 8192, pointers=True)
    assert not major("dkdv", 128, False, 2048, pointers=True) and major("dkdv", 64, True, 1024, pointers=True)


@pytest.mark.parametrize("choose, attr, env", [
    ("dkdv_query_major", "DKDV_QUERY_MAJOR", "FA3NN_TRITON_DKDV_QUERY_MAJOR"),
    ("tma_loads", "DKDV_TMA_LOADS", "FA3NN_TRITON_DKDV_TMA"),
], ids=str)
def test_dkdv_switches_force_and_refuse(choose, attr, env, monkeypatch):
    """Each tri-state switch: "1" forces it for any key-block kernel, "0" off where its table says on, anything
    else refused by the variable's name."""
    from fa3nn.backends.triton import launch

    choose = getattr(launch, choose)
    monkeypatch.setattr(launch, attr, "1")
    assert choose("dkdv_split", 256, False, 2048) and choose("dv", 256, False, 512)
    monkeypatch.setattr(launch, attr, "0")
    assert not choose("dkdv", 64, False, 2048) and not choose("dkdv", 128, False, 8192)
    monkeypatch.setattr(launch, attr, "yes")
    with pytest.raises(ValueError, match=f"{env}=yes"):
        choose("dkdv", 64, False, 2048)


def test_descriptor_tables_and_switches(monkeypatch):
    """configs.TMA_LOADS["dq"] and configs.TMA_BATCHED decide per (head dim, causal, bucket) and direction where
    FA3NN_TRITON_DQ_TMA / FA3NN_TRITON_TMA_BATCHED are "auto"; "1" / "0" force them everywhere; anything else is
    refused by the variable's name."""
    from fa3nn.backends.triton import launch

    dq_tma = functools.partial(launch.tma_loads, "dq")
    assert dq_tma(128, True, 512) and dq_tma(64, False, 16384) and not dq_tma(64, True, 16384)
    assert dq_tma(256, False, 2048) and dq_tma(256, True, 2048) and not dq_tma(256, True, 1024)
    batched = launch.tma_batched
    assert batched("bwd", 128, True, 16384) and batched("fwd", 256, True, 8192) and batched("fwd", 128, True, 1024)
    assert not batched("fwd", 128, True, 2048) and not batched("fwd", 64, False, 512)
    assert batched("fwd", 256, False, 8192) and batched("bwd", 256, True, 512) and not batched("bwd", 64, True, 8192)
    for attr, env, choose in (("DQ_TMA_LOADS", "FA3NN_TRITON_DQ_TMA", lambda: dq_tma(256, True, 512)),
                              ("TMA_BATCHED", "FA3NN_TRITON_TMA_BATCHED",
                               lambda: batched("fwd", 64, False, 512))):
        monkeypatch.setattr(launch, attr, "1")
        assert choose()
        monkeypatch.setattr(launch, attr, "0")
        assert not choose()
        monkeypatch.setattr(launch, attr, "yes")
        with pytest.raises(ValueError, match=f"{env}=yes"):
            choose()
        monkeypatch.setattr(launch, attr, "auto")


@pytest.mark.parametrize("batched", [False, True], ids=["rows", "batched"])
@pytest.mark.parametrize("case", ["causal-more-keys-gqa", "window-both", "softcap"], ids=str)
def test_dkdv_tma_loads(case, batched, monkeypatch):
    """The dK/dV kernel's descriptor loads of Q and dO (FA3NN_TRITON_DKDV_TMA=1), forced on under the interpreter
    (on the GPU the default at d128), over the (rows, heads * dim) views or the (batch, seqlen, heads * dim) ones
    (FA3NN_TRITON_TMA_BATCHED=1, no row zeroing in the kernel)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1" if batched else "0")
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(2, sq, sk, h, hk, 64, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


def test_dkdv_tma_loads_varlen(monkeypatch):
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    check_varlen(3, 40, 57, 2, 1, 32, torch.float16, "cpu", causal=True)


def _check_next_sequence_kept_out(causal: bool, poisoned: tuple[int, ...]):
    """Batch 1 of the inputs named in `poisoned` (0 = Q, 1 = K, 2 = V) and of dO all NaN, 29 queries and 37 keys
    (the last blocks reach past batch 0's end into batch 1): batch 0's output and gradients are finite and match the
    reference of batch 0 alone."""
    q, k, v = (torch.randn(2, n, 2, 64, dtype=torch.float16) for n in (29, 37, 37))
    for index in poisoned:
        (q, k, v)[index][1] = float("nan")
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attn_func(*leaves, causal=causal, backend="triton")
    grad = torch.randn_like(out)
    grad[1] = float("nan")
    out.backward(grad)
    ref = [t[:1].clone().requires_grad_() for t in (q, k, v)]
    out_ref = flash_attn_func(*ref, causal=causal, backend="reference")
    out_ref.backward(grad[:1])
    assert torch.isfinite(out[0]).all()
    torch.testing.assert_close(out[:1].float(), out_ref.float(), atol=2e-3, rtol=2e-3)
    for got, want in zip(leaves, ref):
        assert torch.isfinite(got.grad[0]).all()
        torch.testing.assert_close(got.grad[:1].float(), want.grad.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("batched", [False, True], ids=["rows", "batched"])
def test_dkdv_tma_loads_zero_the_next_sequences_rows(batched, monkeypatch):
    """Through descriptors, Q/dO rows past a sequence's end are the next sequence's: NaN there must not reach dK
    or dV (Q enters dS^T Q and the scores, dO enters dP and P^T dO; the masked run zeroes both). Batch 1 is all
    NaN; batch 0's gradients must match the reference of batch 0 alone (29 queries: the last 16-row block reaches
    3 rows into batch 1)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1" if batched else "0")
    _check_next_sequence_kept_out(causal=False, poisoned=(0,))


@pytest.mark.parametrize("case", ["odd-noncausal", "causal-more-queries", "causal-more-keys-gqa", "window-both",
                                  "softcap-causal-gqa"], ids=str)
def test_batched_descriptors_everywhere(case, monkeypatch):
    """FA3NN_TRITON_TMA_BATCHED=1 with every descriptor path on (the forward's Q / K / V, the dK/dV kernel's Q / dO,
    the dQ kernel's K / V): (batch, seqlen, heads * dim) views, no row zeroing in any kernel, every output through
    the rule (head dim 64: the views need the unpadded width)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1")
    batch, sq, sk, h, hk, d, causal, window, softcap = DENSE_CASES[case]
    check_dense(2, sq, sk, h, hk, 64, torch.float16, "cpu", causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("batched, rule", [(False, True), (True, False)], ids=["rows", "batched"])
def test_forward_shared_memory_rule_follows_the_views(batched, rule, monkeypatch):
    """The forward's tile is fitted to shared memory with the (rows, heads * dim) descriptors' num_stages - 1 buffer
    rule only for those views: through the batched ones Triton keeps num_stages buffers (d256 128x64/8w/3: 257 KB
    offline, past the H200's 227), so the fit must count them all (it then runs 2 stages there)."""
    from fa3nn.backends.triton import launch

    seen = {}

    class Stop(Exception):
        pass

    def record(kind, kernel, shape, tma=False, pointers=False):
        seen[kind] = tma
        raise Stop

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1" if batched else "0")
    monkeypatch.setattr(launch, "_launcher", record)
    q, k, v = (torch.randn(2, 64, 2, 64, dtype=torch.float16) for _ in range(3))
    with pytest.raises(Stop):
        flash_attn_func(q, k, v, causal=True, backend="triton")
    assert seen == {"fwd": rule}


def test_batched_descriptors_keep_the_next_sequence_out(monkeypatch):
    """Through (batch, seqlen) descriptors the rows past batch 0's end are zeros from the copy engine, not batch 1's:
    with batch 1's Q, K, V and dO all NaN, batch 0's output and gradients are finite and match the reference of
    batch 0 alone (29 queries and 37 keys: the last blocks reach past both ends)."""
    from fa3nn.backends.triton import launch

    monkeypatch.setenv("FA3NN_TRITON_TMA", "1")
    monkeypatch.setattr(launch, "DKDV_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "DQ_TMA_LOADS", "1")
    monkeypatch.setattr(launch, "TMA_BATCHED", "1")
    _check_next_sequence_kept_out(causal=True, poisoned=(0, 1, 2))


def test_atomic_dq_reduce_target(monkeypatch):
    """The atomic backward adds dQ tiles by TMA reduce only where a tile cannot reach another sequence's rows or
    another head's columns: dense calls with an unpadded head dim; varlen, head dim 96 (padded to 128) and
    FA3NN_TRITON_TMA=0 keep the per-element atomics. (The TMA reduce itself runs on sm_90 GPUs only: the
    interpreter has no bulk reduce; tests/test_triton_gpu.py::test_atomic_dq_path covers it.)"""
    from fa3nn.backends.triton import launch

    def target(shape_of, d, varlen=None, env="1"):
        monkeypatch.setenv("FA3NN_TRITON_TMA", env)
        q, k, v = (torch.randn(*shape_of, 4, d) for _ in range(3))
        shape = launch._Shape(q, k, v, _params(True, (-1, -1), 0.0), varlen)
        return launch._dq_reduce_target(torch.zeros(q.shape), shape)

    desc = target((2, 40), 64)
    assert desc is not None and list(desc.shape) == [2, 40, 4 * 64]
    assert target((2, 40), 96) is None
    assert target((2, 40), 64, env="0") is None
    assert target((2, 40), 64, env="auto") is None  # CPU tensors: no descriptors
    cu = torch.tensor([0, 30, 80], dtype=torch.int32)
    assert target((80,), 64, varlen=Varlen(cu, cu, 50, 50, (0, 30, 80), (0, 30, 80))) is None


def _params(causal, window, softcap):
    from fa3nn.backends.base import AttnParams

    return AttnParams(0.125, Window.from_args(causal, window), softcap, False)


# gpt-oss's sinks in the forward's epilogue (kernels._with_sink): the kernel with sinks against the same kernel
# without them corrected in Python (fa3nn.sinks.apply_sinks, which rounds out once more: within a unit of the dtype),
# sinks +30 (dominating every row), -30, -inf (none) and ordinary ones; rows that attend no key (causal with more
# queries than keys) give out 0 and lse = the sink exactly; varlen with a sequence without keys. Then through
# flash_attn_func with gradients (the sinks' own by the backend's generic pass) against the reference backend.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["causal-more-queries", "window-left-causal", "softcap-causal-gqa", "varlen"])
def test_sinks_in_the_kernel(case, dtype):
    from fa3nn.backends.base import AttnParams
    from fa3nn.backends.triton import launch
    from fa3nn.sinks import apply_sinks, sinks_gradient, with_sinks

    if case == "varlen":
        starts_q, starts_k = (0, 20, 21, 45), (0, 30, 30, 57)  # the second sequence: a query, no key
        q, k, v = (t[0] for t in random_qkv(1, 45, 57, 4, 2, 32, dtype))
        cu_q, cu_k = (torch.tensor(s, dtype=torch.int32) for s in (starts_q, starts_k))
        lengths = Varlen(cu_q, cu_k, 24, 30, starts_q, starts_k)
        causal, window, softcap, nheads = True, (-1, -1), 0.0, 4
    else:
        batch, sq, sk, nheads, hk, d, causal, window, softcap = DENSE_CASES[case]
        q, k, v = random_qkv(batch, sq, sk, nheads, hk, d, dtype)
        lengths = None
    sinks = torch.tensor([30.0, -30.0, float("-inf"), 0.7])[:nheads]
    params = AttnParams(q.shape[-1] ** -0.5, Window.from_args(causal, window), softcap, False)
    out, lse = launch.forward(q, k, v, params, lengths, sinks)
    out_py, lse_py = apply_sinks(*launch.forward(q, k, v, params, lengths), sinks)
    unit = torch.finfo(dtype).eps
    torch.testing.assert_close(out, out_py, atol=unit, rtol=2 * unit)
    torch.testing.assert_close(lse, lse_py, atol=1e-5, rtol=1e-6)
    keyless = torch.isneginf(launch.forward(q, k, v, params, lengths)[1])
    assert keyless.any() or case == "window-left-causal"
    heads = torch.arange(nheads).view(-1, 1) if lengths is not None else torch.arange(nheads).view(1, -1, 1)
    assert torch.equal(lse[keyless], sinks[heads.expand_as(lse)][keyless].to(lse.dtype))
    # the backward's sinks gradient from its delta kernel against the generic pass (float32 products, as the kernel)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    *_, dsinks = launch.backward(dout, q, k, v, out, lse, dlse, params, lengths, sinks)
    expected = sinks_gradient(dout.float(), out.float(), lse, dlse, sinks)
    torch.testing.assert_close(dsinks, expected, rtol=1e-4, atol=1e-4)
    if lengths is None:
        leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks.clamp(min=-30.0))]
        got = flash_attn_func(*leaves[:3], causal=causal, window_size=window, softcap=softcap, sinks=leaves[3],
                              backend="triton")
        refs = [t.detach().double().requires_grad_() for t in leaves]  # attention_ref with the sinks applied after
        pts = [t.detach().clone().requires_grad_() for t in leaves]  # (the yardstick: in the inputs' dtype)
        expected, yardstick = (with_sinks(*attention_ref(*x[:3], causal=causal, window_size=window, softcap=softcap,
                                                         upcast=upcast, reorder_ops=not upcast), x[3])[0]
                               for x, upcast in ((refs, True), (pts, False)))
        dout = torch.randn_like(got)
        assert_error_ratio(got, expected, yardstick, "out")
        for name, g, e, y in zip(("dq", "dk", "dv", "dsinks"), torch.autograd.grad(got, leaves, dout),
                                 torch.autograd.grad(expected, refs, dout.double()),
                                 torch.autograd.grad(yardstick, pts, dout)):
            if name == "dsinks" and dtype == torch.float32:
                # one number per head: the rule would compare single roundings (the yardstick's 3.0e-8 against
                # 6.3e-7 here, 3.8e-7 against 3.3e-7 at another seed); the sums' rounding bound instead
                torch.testing.assert_close(g.double(), e, rtol=2e-6, atol=1e-6)
            else:
                assert_error_ratio(g, e, y, name)


def test_double_backward_raises():
    """The kernels' gradients carry no autograd history: a gradient penalty through them raises (it was silently
    dropped) rather than differentiate as a constant."""
    q, k, v = random_qkv(1, 16, 16, 2, 2, 16, torch.float32, requires_grad=True)
    out = flash_attn_func(q, k, v, causal=True, backend="triton")
    dq = torch.autograd.grad(out.sum(), q, create_graph=True)[0]
    loss = out.sum() + (dq * dq).sum()
    with pytest.raises(RuntimeError, match="triton backend's backward does not support double backward"):
        torch.autograd.grad(loss, q, allow_unused=True)


def test_kvcache_forced_triton_under_autocast_is_checked_in_the_autocast_dtype():
    """flash_attn_with_kvcache checks a forced backend before it writes the cache, but it checked q's own dtype while
    the attention runs in autocast's (flash_attn_varlen_func casts): float32 tensors under a bf16 autocast passed the
    check (the interpreter takes float32), the new keys were written, then the bf16 attention was refused, leaving
    the cache changed by a refused call (and on a GPU, where Triton takes no float32, such a call was refused though
    it would run in bf16). Under an fp16 autocast it runs in fp16 on the interpreter."""
    from fa3nn import flash_attn_with_kvcache
    from fa3nn.dispatch import UnsupportedCall

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1, 2, 32, generator=g) for _ in range(3))
    k_cache, v_cache = torch.randn(2, 8, 2, 32, generator=g), torch.randn(2, 8, 2, 32, generator=g)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(UnsupportedCall, match="dtype torch.bfloat16"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=3, backend="triton")
    assert torch.equal(k_cache, before_k) and torch.equal(v_cache, before_v)
    with torch.autocast("cpu", dtype=torch.float16):
        out = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=3, causal=True, backend="triton")
    want = flash_attn_with_kvcache(q.half(), before_k.half(), before_v.half(), k.half(), v.half(), cache_seqlens=3,
                                   causal=True, backend="triton")
    assert out.dtype == torch.float16 and torch.equal(out, want)
    assert torch.equal(k_cache[:, 3], k[:, 0])
