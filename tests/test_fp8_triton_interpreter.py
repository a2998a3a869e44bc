"""The fused FP8 quantization pass and the Triton FP8 forward on the CPU, under TRITON_INTERPRET=1
(tests/fp8_kernel_checks.py holds the checks and their tolerances).

Does the interpreter handle float8? Loads, stores and tl.dot of e4m3 operands yes (exactly: it widens through fp16).
Its fp32 -> e4m3 cast no: it truncates instead of rounding to nearest even (Triton 3.9: -127.54 -> -64, 5372 of
65536 test values wrong) and turns NaN into 384. The kernels therefore round onto e4m3's grid in fp32 arithmetic
under the interpreter (SOFTWARE_CAST) and cast only exact values; these tests cover that path and every value of
the format. The hardware cast (cvt.rn.satfinite) and NaN inputs are covered by tests/test_fp8_triton_gpu.py.
The interpreter's bf16 is unreliable (numpy has none): inputs are fp16 and fp32 here, bf16 on the GPU.

Run as the Triton interpreter tests are (see tests/test_triton_interpreter.py): on a CPU-only machine, or with
CUDA_VISIBLE_DEVICES= on a GPU one.
"""

from __future__ import annotations

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
from fp8_kernel_checks import check_forward, check_quantize, check_walsh_hadamard  # noqa: E402

import fa3nn  # noqa: E402
from fa3nn.backends.triton.fp8_launch import forward_fp8  # noqa: E402
from fa3nn.backends.triton.quantize import _parts, quantize_fused  # noqa: E402
from fa3nn.fp8 import make_state, random_sign_hadamard  # noqa: E402
from fa3nn.fp8.hadamard import random_signs  # noqa: E402
from fa3nn.fp8.operands import transpose_v, v_from_vt, vt_columns, vt_group_column  # noqa: E402
from fa3nn.fp8.quantize import quantize_qkv_tensors, recipe_arguments  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.testing import random_padding_mask, unpad  # noqa: E402
from fa3nn.testing.interpreter_xor import numpy_xor_reductions  # noqa: E402

E4M3 = torch.float8_e4m3fn


def column(key: int) -> int:
    """vt8 column of a key counted from its sequence's start (fa3nn.fp8.operands)."""
    return int(vt_group_column(torch.tensor(key)))

# Under the interpreter the kernel's sums are numpy's fp32 and its cast the emulation's, so only summation order and
# exp2 vs exp separate it from the emulation (measured: rms ratio < 1e-3, lse ratio ~ 3e-5).
TIGHT = dict(rms_ratio=0.01, lse_ratio=0.01)


@pytest.fixture(scope="module", autouse=True)
def interpreter():
    from triton.runtime.interpreter import InterpretedFunction

    if os.environ.get("TRITON_INTERPRET") != "1" or not isinstance(triton.language.zeros, InterpretedFunction):
        pytest.fail("triton was imported before TRITON_INTERPRET=1 was set; set it in the environment before "
                    "anything imports triton", pytrace=False)
    os.environ["FA3NN_TRITON_CPU"] = "1"
    with numpy_xor_reductions():  # tl.flip at numpy speed (fa3nn.testing.interpreter_xor says why and that it is exact)
        yield
    del os.environ["FA3NN_TRITON_CPU"]


def qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, headdim_v=None, dtype=torch.float16, scale=1.0):
    q = (torch.randn(batch, seqlen_q, nheads, headdim) * scale).to(dtype)
    k = torch.randn(batch, seqlen_k, nheads_kv, headdim).to(dtype)
    v = (torch.randn(batch, seqlen_k, nheads_kv, headdim_v or headdim) * 2).to(dtype)
    return q, k, v


def rotation(headdim, seed=3):
    return random_sign_hadamard(random_signs(seed, headdim))


# --- quantization ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block_q,block_k,rotate,scales",
    [
        (32, 16, False, None),  # per tile, one program per tile
        (48, 32, False, None),  # a tile that is not a power of two: masked rows inside the program
        (0, 0, False, None),  # per (batch, head), sequences <= 128 rows: still one pass
        (160, 16, False, None),  # a 160-row Q tile: block amaxes, then the cast pass
        (0, 0, False, (20.0, 100.0, 50.0)),  # per-tensor scales given (delayed scaling)
        (32, 16, True, None),  # per tile with the Hadamard rotation fused in
        (16, 48, True, None),  # Q has more blocks than K/V (their surplus programs only zero their amax slot)
        (0, 0, True, (2.0, 3.0, 4.0)),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_quantize_matches_torch(block_q, block_k, rotate, scales, dtype):
    q, k, v = qkv(2, 170, 50, 4, 2, 64, headdim_v=32, dtype=dtype, scale=3.0)
    check_quantize(q, k, v, block_q, block_k, rotation(64) if rotate else None,
                   torch.tensor(scales) if scales else None)


def test_quantize_long_sequence_per_head_two_passes():
    q, k, v = qkv(1, 300, 260, 2, 1, 32)
    check_quantize(q, k, v, 0, 0)
    check_quantize(q, k, v, 0, 0, rotation(32))


@pytest.mark.parametrize("block_k", [192, 256])
def test_quantize_two_part_tiles(block_k):
    """K/V tiles of 192 (128 + 64 rows) and 256 rows (128 + 128: the d128 FP8 default) run as one program in two
    parts (quantize._parts); 300 keys end in a partial tile."""
    assert _parts(block_k) == {192: (128, 64), 256: (128, 128)}[block_k]
    q, k, v = qkv(1, 130, 300, 2, 1, 32)
    check_quantize(q, k, v, 128, block_k)
    check_quantize(q, k, v, 128, block_k, rotation(32))


def test_quantize_non_power_of_two_headdim():
    q, k, v = qkv(1, 40, 40, 2, 2, 96, headdim_v=80)
    check_quantize(q, k, v, 16, 32, rotation(96))  # rotation: block-diagonal 32 x 32 Hadamard blocks


def test_quantize_zero_tiles_and_infinities():
    """An all-zero tile quantizes at scale 1 (descale 1); an Inf makes its tile's scale 1 and saturates to 448."""
    q, k, v = qkv(1, 64, 64, 1, 1, 32)
    q[:, :16] = 0
    k[0, 20, 0, 3] = float("inf")
    v[0, 40, 0, 0] = -float("inf")
    operands = check_quantize(q, k, v, 16, 16)
    assert (operands.q_descale[0, 0, 0] == 1.0) and (operands.k_descale[0, 0, 1] == 1.0)
    assert operands.k[0, 20, 0, 3].float() == 448 and operands.vt[0, 0, 0, column(40)].float() == -448


# --- the rotation as a fast Walsh-Hadamard transform (rotate_precision="fwht") ------------------------------------


@pytest.mark.parametrize("headdim", [16, 64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_walsh_hadamard_within_fp32_bound(headdim, dtype):
    x = (torch.randn(16, headdim) * 3).to(dtype)
    x[0] = 0
    x[1] = torch.randn(headdim).to(dtype) * 1e4 * torch.linspace(1e-4, 1, headdim).to(dtype)  # wide magnitudes
    check_walsh_hadamard(x)


@triton.jit
def _flip_and_xor_kernel(x_ptr, bits_ptr, flipped_ptr, xor_ptr, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(flipped_ptr + offs, tl.flip(tl.load(x_ptr + offs), 1))
    tl.store(xor_ptr + tl.arange(0, R), tl.xor_sum(tl.load(bits_ptr + offs), 1))


def test_numpy_xor_reductions_match_the_element_loop(monkeypatch):
    """This module's interpreter reduces xor combines with numpy (fa3nn.testing.interpreter_xor); the same tile through
    the interpreter's own element loop, torch.flip and numpy must agree bit for bit."""
    from triton.runtime import interpreter

    x = torch.randn(4, 8)
    bits = torch.randint(-2**31, 2**31 - 1, (4, 8), dtype=torch.int32)

    def run():
        flipped, xor = torch.empty_like(x), torch.empty(4, dtype=torch.int32)
        _flip_and_xor_kernel[(1,)](x, bits, flipped, xor, R=4, C=8)
        return flipped, xor

    fast = run()
    assert interpreter.ReduceOps.apply_impl.__module__ == "fa3nn.testing.interpreter_xor"  # the fixture's patch ran
    monkeypatch.setattr(interpreter.ReduceOps, "apply_impl", lambda self, input: self.generic_reduce(input))
    loop = run()
    assert torch.equal(fast[0], loop[0]) and torch.equal(fast[0], x.flip(1))
    expected = np.bitwise_xor.reduce(bits.numpy(), axis=1)
    assert torch.equal(fast[1], loop[1]) and fast[1].tolist() == expected.tolist()


def test_walsh_hadamard_exact_on_small_integers():
    """Integers below 2^24 / d: every sum is exact in fp32, so the transform must be x @ H exactly (this catches a
    pairing that a rounding-error bound could hide at d = 16)."""
    x = torch.randint(-64, 65, (16, 128)).float()
    x[2] = 0
    x[2, 77] = 1  # a unit vector: row 77 of H
    assert check_walsh_hadamard(x) == 0.0


@pytest.mark.parametrize("block_q,block_k,scales", [(32, 16, None), (0, 0, (2.0, 3.0, 4.0)), (0, 0, None)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_quantize_fwht_matches_torch(block_q, block_k, scales, dtype):
    """Per tile in one pass, per-tensor scales given, per (batch, head) in two passes (170 rows)."""
    q, k, v = qkv(2, 170, 50, 4, 2, 64, headdim_v=32, dtype=dtype, scale=3.0)
    check_quantize(q, k, v, block_q, block_k, rotation(64), torch.tensor(scales) if scales else None,
                   rotate_precision="fwht")


@pytest.mark.parametrize("headdim", [128, 256])
def test_quantize_fwht_wide_heads(headdim):
    """128-row tiles: one pass (d = 256 too: the FWHT needs no GEMM operands); a tile per (batch, head) of 130-140
    rows: one 256-row pass at d = 128, two passes at d = 256."""
    q, k, v = qkv(1, 130, 140, 2, 1, headdim)
    check_quantize(q, k, v, 128, 128, rotation(headdim, seed=5), rotate_precision="fwht")
    check_quantize(q, k, v, 0, 0, rotation(headdim, seed=5), rotate_precision="fwht")


def test_quantize_fwht_non_power_of_two_headdim_takes_the_gemm():
    q, k, v = qkv(1, 40, 40, 2, 2, 96, headdim_v=80)
    check_quantize(q, k, v, 16, 32, rotation(96), rotate_precision="fwht")  # block-diagonal R: FWHT_FALLBACK
    with pytest.raises(ValueError, match="rotate_precision 'tf32' is not one of"):
        quantize_fused(q, k, v, 16, 32, rotation(96), rotate_precision="tf32")


def cu_seqlens(lengths):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def test_quantize_varlen():
    """Tiles restart at each sequence; an empty sequence keeps unit descales; Vᵀ columns start at 16-aligned
    vt_starts (fa3nn.fp8.operands), zeros between sequences."""
    lengths_q, lengths_k = [30, 0, 45, 7], [10, 35, 0, 21]
    cu_q, cu_k = cu_seqlens(lengths_q), cu_seqlens(lengths_k)
    q = (torch.randn(sum(lengths_q), 4, 64) * 2).half()
    k, v = torch.randn(sum(lengths_k), 2, 64).half(), torch.randn(sum(lengths_k), 2, 64).half()
    for blocks in ((16, 16), (32, 16), (0, 0)):
        operands = check_quantize(q, k, v, *blocks, None, None, cu_q, cu_k, max(lengths_q), max(lengths_k))
        assert operands.vt_starts.tolist() == [0, 16, 64, 64, 96]  # 10 -> 16, 35 -> 48, 0, 21 -> 32 columns
        assert operands.vt.shape == (2, 64, 128)  # vt_columns: 66 keys + 15 per sequence, padded to 128
        data = torch.zeros(128, dtype=torch.bool)
        for start, length in zip(operands.vt_starts.tolist(), lengths_k):
            data[start + vt_group_column(torch.arange(length))] = True
        assert (operands.vt[..., ~data].float() == 0).all()
    check_quantize(q, k, v, 16, 16, rotation(64), None, cu_q, cu_k, max(lengths_q), max(lengths_k))
    check_quantize(q, k, v, 16, 16, rotation(64), None, cu_q, cu_k, max(lengths_q), max(lengths_k),
                   rotate_precision="fwht")


def test_vt_layout_contract_varlen():
    """Packed vt8[h, :, vt_starts[i] + vt_group_column(j)] is key j of sequence i, V head h; every sequence starts at
    a multiple of 16 (the native kernel's TMA rule), every other column is zero; transpose_v / v_from_vt agree with
    the fused pass."""
    lengths = [17, 0, 1, 33, 16, 5]
    cu_k = cu_seqlens(lengths)
    q = torch.randn(sum(lengths), 2, 32).half()
    k, v = torch.randn(sum(lengths), 1, 32).half(), torch.randn(sum(lengths), 1, 16).half()
    operands = quantize_fused(q, k, v, 16, 16, None, None, cu_k, cu_k, max(lengths), max(lengths))
    starts = operands.vt_starts.tolist()
    assert starts == [0, 32, 32, 48, 96, 112, 128]
    assert all(start % 16 == 0 for start in starts)
    assert operands.vt.shape == (1, 16, vt_columns(sum(lengths), len(lengths))) and operands.vt.is_contiguous()
    v8 = quantize_qkv_tensors(q, k, v, 16, 16, cu_seqlens_q=cu_k, cu_seqlens_k=cu_k, max_seqlen_q=max(lengths),
                              max_seqlen_k=max(lengths)).v
    written = torch.zeros(operands.vt.shape[-1], dtype=torch.bool)
    for i, length in enumerate(lengths):
        for j in range(length):
            assert torch.equal(operands.vt[0, :, starts[i] + column(j)].view(torch.uint8),
                               v8[cu_k[i] + j, 0].view(torch.uint8))
        written[starts[i] + vt_group_column(torch.arange(length))] = True
    assert (operands.vt[..., ~written].float() == 0).all()
    assert torch.equal(transpose_v(v8, cu_k).view(torch.uint8), operands.vt.view(torch.uint8))
    assert torch.equal(v_from_vt(operands.vt, sum(lengths), cu_k).view(torch.uint8), v8.view(torch.uint8))


def test_vt_layout_contract():
    """vt8[b, h, :, vt_group_column(j)] is key j of V head h: (batch, nheads_kv, dv, ceil(seqlen_k / 16) * 16),
    every column no key maps to zero."""
    q, k, v = qkv(2, 20, 37, 2, 2, 32, headdim_v=16)
    operands = quantize_fused(q, k, v, 16, 16)
    assert operands.vt.shape == (2, 2, 16, 48) and operands.vt.is_contiguous()
    v8 = quantize_qkv_tensors(q, k, v, 16, 16).v
    for b, h, j in ((1, 0, 5), (0, 1, 36), (1, 1, 16), (0, 0, 10), (1, 1, 33)):
        assert torch.equal(operands.vt[b, h, :, column(j)].view(torch.uint8), v8[b, j, h].view(torch.uint8))
    unused = torch.ones(48, dtype=torch.bool)
    unused[vt_group_column(torch.arange(37))] = False
    assert unused.sum() == 11 and (operands.vt[..., unused].float() == 0).all()
    assert torch.equal(transpose_v(v8).view(torch.uint8), operands.vt.view(torch.uint8))
    assert torch.equal(v_from_vt(operands.vt, 37).view(torch.uint8), v8.view(torch.uint8))


def test_quantize_refuses_key_tiles_off_the_vt_groups():
    """block_k must be 0 or a multiple of 16: V's rows are read in Vᵀ's 16-key group order within blocks that start
    at multiples of 16 (a 40-row tile would write some columns twice and others never)."""
    q, k, v = qkv(1, 64, 100, 1, 1, 32)
    with pytest.raises(ValueError, match="block_k must be 0 or a positive multiple of 16"):
        quantize_fused(q, k, v, 16, 40)


def test_vt_group_column_is_the_fragment_order():
    """Column 4q + j of each 16-key group holds key 2q + (j & 1) + 8 (j >> 1): the keys thread q of a quad holds in
    the score accumulator, in its e4m3 A-fragment order (kernels/hopper/wgmma_fp8.cuh); a permutation per group."""
    keys = torch.arange(48)
    columns = vt_group_column(keys)
    assert sorted(columns.tolist()) == keys.tolist() and ((columns // 16) == (keys // 16)).all()
    for q in range(4):
        for j in range(4):
            assert column(2 * q + (j & 1) + 8 * (j >> 1)) == 4 * q + j
            assert column(16 + 2 * q + (j & 1) + 8 * (j >> 1)) == 16 + 4 * q + j


def test_e4m3_cast_rounds_like_torch():
    """Every e4m3 value, every midpoint between neighbours (ties to even), values past 448, +-Inf, subnormals and
    -0.0, through the kernel's cast at scale 1: bitwise torch's saturated round-to-nearest-even."""
    finite = torch.arange(256, dtype=torch.uint8).view(E4M3).float()
    finite = finite[torch.isfinite(finite)].sort().values
    midpoints = (finite[1:] + finite[:-1]) / 2
    special = torch.tensor([448.5, 460.0, 1e6, float("inf"), -float("inf"), -0.0, 2.0**-10, -(2.0**-10), 3e-4])
    values = torch.cat([finite, midpoints, special, torch.randn(2048) * torch.logspace(-4, 3, 2048)])
    rows = -(-values.numel() // 32)
    q = torch.nn.functional.pad(values, (0, rows * 32 - values.numel())).view(1, rows, 1, 32)
    ones = torch.ones(3)
    operands = quantize_fused(q, q, q, 0, 0, None, ones)
    expect = q.clamp(-448, 448).to(E4M3)
    assert torch.equal(operands.q.view(torch.uint8), expect.view(torch.uint8))


# --- forward ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window,softcap",
    # Window(60, 30): for query rows 32..63 (tile 32 x 16) a masked left run [0, 32), an unmasked run [32, 80) and a
    # masked right run [80, 90), so the kernel must walk them in key order to round P like the emulation.
    [(Window(), 0.0), (Window(-1, 0), 0.0), (Window(10, 3), 0.0), (Window(60, 30), 0.0), (Window(), 5.0),
     (Window(20, 0), 5.0)],
    ids=str,
)
def test_forward_matches_emulation(window, softcap):
    q, k, v = qkv(2, 70, 90, 4, 2, 64)
    check_forward(q, k, v, 32, 32, window, softcap, **TIGHT)


@pytest.mark.parametrize("block_q,block_k,rotate", [(16, 48, False), (0, 0, False), (32, 16, True)], ids=str)
def test_forward_recipes(block_q, block_k, rotate):
    """Scale tiles smaller and larger than the kernel's tiles, one per (batch, head), and rotated Q, K."""
    q, k, v = qkv(1, 100, 100, 2, 1, 32)
    check_forward(q, k, v, block_q, block_k, Window(-1, 0), rotation=rotation(32) if rotate else None, **TIGHT)


@pytest.mark.parametrize("window", [Window(), Window(40, 0)], ids=str)
def test_forward_v_tiles_of_different_scales(window):
    """V tiles whose descales differ by 4x and 16x from their neighbours: the accumulator's unit follows each key
    tile's V descale (rounding point 6 of fa3nn.fp8.reference); a left window starts some query tiles after the
    first tiles, so their first unit is another tile's."""
    q, k, v = qkv(1, 64, 96, 2, 1, 32)
    v[:, 16:32] *= 0.25
    v[:, 64:80] *= 4.0
    check_forward(q, k, v, 16, 16, window, **TIGHT)


def test_forward_headdim_v_and_fp32():
    q, k, v = qkv(1, 40, 50, 2, 2, 48, headdim_v=24, dtype=torch.float32)
    check_forward(q, k, v, 16, 16, Window(-1, 0), **TIGHT)


def test_forward_seqlen_q_longer_than_k_causal():
    """Bottom-right causal with more queries than keys: the first rows attend nothing (out 0, lse -inf)."""
    q, k, v = qkv(1, 50, 20, 2, 2, 32)
    check_forward(q, k, v, 16, 16, Window(-1, 0), **TIGHT)


@pytest.mark.parametrize("window", [Window(2**31 - 1, 2**31 - 1), Window(-1, 2**31 - 60)], ids=str)
def test_forward_windows_up_to_int32_max(window):
    """Sides up to 2**31 - 1 (fa3nn.checks.WINDOW_MAX): the kernel adds them to indices in int32, so the launcher
    bounds them by the sequence lengths (fa3nn.masks.Window.kernel_sides); unbounded they wrapped around (out off
    by ~0.9)."""
    q, k, v = qkv(1, 40, 50, 2, 1, 32)
    check_forward(q, k, v, 16, 16, window, **TIGHT)


@pytest.mark.parametrize("window", [Window(), Window(-1, 0), Window(10, 3)], ids=str)
def test_forward_varlen_unaligned_and_empty(window):
    """Key sequences that start at unaligned cu_seqlens_k offsets (17, 18, 51, ...), an empty key sequence with
    queries (its rows attend nothing), an empty query sequence, and one of length 1: the kernel reads each sequence's
    Vᵀ at vt_starts and nothing of its neighbours."""
    lengths_q, lengths_k = [20, 7, 0, 40, 3], [17, 0, 1, 33, 50]
    batch, max_q, max_k = len(lengths_q), max(lengths_q), max(lengths_k)
    q, k, v = qkv(batch, max_q, max_k, 2, 1, 32)
    mask_q = torch.arange(max_q)[None] < torch.tensor(lengths_q)[:, None]
    mask_k = torch.arange(max_k)[None] < torch.tensor(lengths_k)[:, None]
    (q_packed, cu_q, msq), (k_packed, cu_k, msk) = unpad(q, mask_q), unpad(k, mask_k)
    v_packed = unpad(v, mask_k)[0]
    check_forward(q_packed, k_packed, v_packed, 16, 16, window, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                  max_seqlen_q=msq, max_seqlen_k=msk, mask_q=mask_q, mask_k=mask_k, **TIGHT)


@pytest.mark.parametrize("window", [Window(), Window(-1, 0)], ids=str)
def test_forward_varlen(window):
    batch, max_q, max_k = 3, 60, 70
    q, k, v = qkv(batch, max_q, max_k, 2, 1, 32)
    mask_q = random_padding_mask(batch, max_q)
    mask_k = random_padding_mask(batch, max_k)
    q_packed, cu_q, msq = unpad(q, mask_q)
    k_packed, cu_k, msk = unpad(k, mask_k)
    v_packed, _, _ = unpad(v, mask_k)
    check_forward(q_packed, k_packed, v_packed, 16, 32, window, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                  max_seqlen_q=msq, max_seqlen_k=msk, mask_q=mask_q, mask_k=mask_k, **TIGHT)


# --- the op -----------------------------------------------------------------------------------------------------


def test_op_runs_the_fused_pass_and_triton_kernel():
    """fp8=..., backend='triton': explain names the kernel, the output is exactly quantize_fused + forward_fp8's,
    the amax is the PyTorch pass's, and training runs the bf16 backward."""
    q, k, v = qkv(1, 40, 40, 2, 2, 32)
    recipe = fa3nn.PerTileScaling(block_q=16, block_k=16)
    assert fa3nn.explain(q, k, v, fp8=recipe, backend="triton").forward == "triton fp8 kernel"
    state = make_state(recipe)
    arguments = recipe_arguments(recipe, state, q, k, v)
    operands = quantize_fused(q, k, v, **arguments)
    expect, expect_lse = forward_fp8(operands.q, operands.k, operands.vt, operands.q_descale, operands.k_descale,
                                     operands.v_descale, 16, 16, 32**-0.5, Window(-1, 0), None, None, 40, 40,
                                     torch.float16)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out, lse, amax, q8, k8, *_ = torch.ops.fa3nn.fwd_fp8(*leaves, None, None, 40, 40, 32**-0.5, -1, 0, 0.0, False,
                                                         "triton", 16, 16, arguments["rotation"], None, False, 0, True)
    assert torch.equal(out, expect) and torch.equal(lse, expect_lse)
    assert torch.equal(q8, operands.q.view(torch.uint8)) and torch.equal(k8, operands.k.view(torch.uint8))
    _, _, amax_emulated, *_ = torch.ops.fa3nn.fwd_fp8(q, k, v, None, None, 40, 40, 32**-0.5, -1, 0, 0.0, False,
                                                  "reference", 16, 16, arguments["rotation"], None)
    torch.testing.assert_close(amax, amax_emulated, rtol=1e-5, atol=0)  # rotated Q, K: summation order
    grads = torch.autograd.grad(out, leaves, torch.randn_like(out))
    assert all(torch.isfinite(g).all() for g in grads)


def test_varlen_op_runs_the_fused_pass_and_triton_kernel():
    """A packed batch with unaligned key starts through fa3nn.flash_attn_varlen_func(fp8=..., backend='triton'):
    exactly quantize_fused + forward_fp8 on the operands' vt_starts."""
    lengths = [19, 0, 33, 7]
    cu = cu_seqlens(lengths)
    q, k, v = (torch.randn(sum(lengths), 2, 32).half() for _ in range(3))
    recipe = fa3nn.PerTileScaling(block_q=16, block_k=16, incoherent=False)  # the rotation has its own tests
    call = dict(causal=True, fp8=recipe)
    assert fa3nn.explain(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=33, max_seqlen_k=33,
                         backend="triton", **call).forward == "triton fp8 kernel"
    out = fa3nn.flash_attn_varlen_func(q, k, v, cu, cu, 33, 33, backend="triton", **call)
    operands = quantize_fused(q, k, v, 16, 16, None, None, cu, cu, 33, 33)
    expect, _ = forward_fp8(operands.q, operands.k, operands.vt, operands.q_descale, operands.k_descale,
                            operands.v_descale, 16, 16, 32**-0.5, Window(-1, 0), cu, cu, 33, 33, torch.float16,
                            vt_starts=operands.vt_starts)
    assert torch.equal(out, expect)


def test_auto_keeps_the_emulation_on_the_cpu():
    """CPU calls with backend='auto' never land in the interpreter (FA3NN_TRITON_CPU is only the tests' opt-in)."""
    q, k, v = qkv(1, 20, 20, 1, 1, 32)
    del os.environ["FA3NN_TRITON_CPU"]
    try:
        assert fa3nn.explain(q, k, v, fp8=True).forward == "fp8 emulation (reference)"
    finally:
        os.environ["FA3NN_TRITON_CPU"] = "1"


@pytest.mark.parametrize("varlen", [False, True])
def test_dequantize_kernel_under_the_interpreter(varlen):
    """fa3nn.backends.triton.dequantize (the backward's Q and K from e4m3, on a GPU) without a rotation against
    (x8 * descale) rounded once and against fa3nn.fp8.backward.restore's PyTorch form, bitwise in fp16: every e4m3 byte
    (NaN and subnormals included), dense and packed with an empty sequence."""
    from fa3nn.fp8.backward import restore
    from fa3nn.fp8.scaling import rows_from_tiles

    shape = (2, 37, 3, 64) if not varlen else (50, 3, 64)
    count = shape[0] * shape[1] * shape[2] * (shape[3] if len(shape) == 4 else 1)
    x8 = torch.arange(256, dtype=torch.uint8).repeat(count // 256 + 1)[:count].view(shape).view(torch.float8_e4m3fn)
    cu = None if not varlen else torch.tensor([0, 5, 5, 50], dtype=torch.int32)
    descale = torch.rand(2 if not varlen else 3, 3, 3) * 4
    rows = shape[1] if not varlen else shape[0]
    want = (x8.float() * rows_from_tiles(descale, 16, rows, cu).unsqueeze(-1)).to(torch.float16)
    got = restore(x8, descale, 16, cu, 45, None, torch.float16, kernel=True)
    definition = restore(x8, descale, 16, cu, 45, None, torch.float16, kernel=False)
    for other in (want, definition):
        assert torch.equal(got.isnan(), other.isnan()) and torch.equal(got[~got.isnan()], other[~other.isnan()])
    assert got.isnan().any() and (got[~got.isnan()] != 0).any()  # the bytes reach NaN and nonzero values


@pytest.mark.parametrize("headdim", [64, 96, 128, 256])
@pytest.mark.parametrize("varlen", [False, True])
def test_restore_kernel_under_the_interpreter(varlen, headdim):
    """The same pass undoing a rotation (a tensor-core product with its +-1 matrix): within one fp16 ulp of the
    PyTorch definition at each row's largest entry (the two sum in float32 in different orders; most entries equal),
    on e4m3 values spanning subnormals to 448, per-tile descales, dense and packed with an empty sequence."""
    from fa3nn.fp8.backward import restore

    torch.manual_seed(headdim)
    shape = (2, 37, 3, headdim) if not varlen else (50, 3, headdim)
    x8 = (torch.randn(shape) * torch.exp2(torch.randint(-10, 9, shape).float())).clamp(-448, 448)
    x8 = x8.to(torch.float8_e4m3fn)
    cu = None if not varlen else torch.tensor([0, 5, 5, 50], dtype=torch.int32)
    descale = torch.rand(2 if not varlen else 3, 3, 3) * 4
    rotation = fa3nn.fp8.make_state(fa3nn.PerTileScaling(), 3).rotation(headdim)
    want = restore(x8, descale, 16, cu, 45, rotation, torch.float16, kernel=False).float()
    got = restore(x8, descale, 16, cu, 45, rotation, torch.float16, kernel=True).float()
    ulp = torch.finfo(torch.float16).eps * want.abs().amax(-1, keepdim=True)
    assert ((got - want).abs() <= ulp).all(), ((got - want).abs() / ulp).max()
    assert (got == want).float().mean() > 0.9 and want.abs().amax() > 0


@pytest.mark.parametrize("headdim", [1, 4, 8, 24])
def test_restore_kernel_takes_head_dims_under_16_as_a_gpu_compiles_it(monkeypatch, headdim):
    """Head dims under 16 (any positive one reaches the backward: the FP8 emulation serves every call, also on a GPU)
    with the rotation: the product with its +-1 matrix is an fp16 tl.dot, whose K a GPU compile requires >= 16
    (Triton's NVIDIA min_dot_size). The interpreter accepts any size, so its lower bound is set to the GPU's here:
    with BLOCK_D = next_power_of_2(d) a d-8 backward failed to compile on CUDA ('K >= 16'); BLOCK_D is padded to 16
    as in the quantization pass."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import min_dot_size
    from triton.runtime.interpreter import interpreter_builder

    from fa3nn.fp8.backward import restore

    monkeypatch.setitem(interpreter_builder.codegen_fns, "min_dot_size", min_dot_size(GPUTarget("cuda", 90, 32)))
    torch.manual_seed(headdim)
    x8 = (torch.randn(2, 37, 3, headdim) * 8).clamp(-448, 448).to(torch.float8_e4m3fn)
    descale = torch.rand(2, 3, 3) * 4
    for rotation in (None, fa3nn.fp8.make_state(fa3nn.PerTileScaling(), 3).rotation(headdim)):
        want = restore(x8, descale, 16, None, None, rotation, torch.float16, kernel=False).float()
        got = restore(x8, descale, 16, None, None, rotation, torch.float16, kernel=True).float()
        ulp = torch.finfo(torch.float16).eps * want.abs().amax(-1, keepdim=True)
        assert ((got - want).abs() <= ulp).all() and want.abs().amax() > 0


@pytest.mark.parametrize("varlen", [False, True])
def test_compiled_fp8_training_with_the_triton_restore(monkeypatch, varlen):
    """torch.compile over FP8 training whose backward restores Q and K with the Triton pass (restore's default on
    CUDA; on the CPU made the default here): AOTAutograd traces fa3nn::fwd_fp8's backward on fake tensors, where a
    raw Triton launch cannot run (on the GPU a FakeTensor has no data pointer; under the interpreter 'Attempted to
    access the data pointer on an invalid python storage'). The pass is a custom op with a fake implementation when
    traced; the compiled gradients are eager's, bit for bit."""
    import fa3nn.fp8.backward as fp8_backward

    monkeypatch.setattr(fp8_backward, "_kernel_by_default", lambda x8: True)
    torch._dynamo.reset()
    torch.manual_seed(0)
    recipe = fa3nn.PerTileScaling(block_q=16, block_k=16)
    eager = fa3nn.FlashAttentionV3(causal=True, fp8=recipe, layer_idx=2).train()
    compiled = torch.compile(fa3nn.FlashAttentionV3(causal=True, fp8=recipe, layer_idx=2).train(), fullgraph=True,
                             backend="aot_eager")
    q = torch.randn(1, 40, 4, 32).half()
    k, v = (torch.randn(1, 40, 2, 32).half() for _ in range(2))
    extra = ()
    if varlen:
        q, k, v = q[0], k[0], v[0]
        extra = (torch.tensor([0, 15, 15, 40], dtype=torch.int32),) * 2 + (25, 25)
    results = []
    for layer in (eager, compiled):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = layer(*leaves, *extra)
        results.append((out, *torch.autograd.grad(out.float().sum(), leaves)))
    for got, want in zip(*results):
        assert torch.equal(got, want)
    torch._dynamo.reset()


@pytest.mark.parametrize("varlen", [False, True])
@pytest.mark.parametrize("rotate", [False, True])
def test_opcheck_restore_rows(rotate, varlen):
    """fa3nn::restore_rows (the Triton restore pass as a custom op, for traced backwards; e4m3 bits as uint8):
    torch.library.opcheck, dense and packed."""
    from fa3nn.fp8.backward import _signs

    x8 = (torch.randn(2, 37, 3, 64) * 8).to(torch.float8_e4m3fn)
    descale = torch.rand(2, 3, 3)
    cu = torch.tensor([0, 30, 74], dtype=torch.int32) if varlen else None
    if varlen:
        x8 = x8.flatten(0, 1)
    signs, c = _signs(make_state(fa3nn.PerTileScaling(), 3).rotation(64) if rotate else None, x8.device)
    torch.library.opcheck(torch.ops.fa3nn.restore_rows.default,
                          (x8.view(torch.uint8), descale, cu, 16, torch.float16, signs, c))


@pytest.mark.parametrize("lengths", [[0, 7, 0, 0, 19, 1, 0, 33, 2, 0, 0, 5, 0], [40], [0, 40], [40, 0], [3] * 17])
def test_restore_pass_finds_each_rows_sequence(lengths):
    """The restore pass finds a packed row's sequence by a binary search over cu_seqlens in the kernel (no per-row
    tensor from the host): empty sequences first, last and in runs, one sequence, batches past a power of two; each
    row takes its own sequence's tiles (descales differ per sequence and tile), bitwise the PyTorch definition."""
    from fa3nn.fp8.backward import restore

    cu = torch.nn.functional.pad(torch.tensor(lengths).cumsum(0), (1, 0)).to(torch.int32)
    total, batch = int(cu[-1]), len(lengths)
    x8 = (torch.randn(total, 2, 32) * 4).to(torch.float8_e4m3fn)
    descale = torch.arange(1, batch * 2 * 5 + 1, dtype=torch.float32).view(batch, 2, 5) / 8  # all distinct
    want = restore(x8, descale, 8, cu, max(lengths), None, torch.float16, kernel=False)
    got = restore(x8, descale, 8, cu, max(lengths), None, torch.float16, kernel=True)
    assert torch.equal(got, want) and (want != 0).any()
