"""Shared checks for the Triton FP8 tests (interpreter and GPU): the fused quantization pass against the PyTorch
definition (fa3nn.fp8.quantize), and the FP8 forward against the emulation (fa3nn.fp8.reference).

Quantization without rotation is bitwise. With a rotation the fused pass sums x @ R in another order than torch's
matmul, so the rotated fp32 values agree to a few ulps: descales and amaxes within 1e-5 relative (about 80 fp32
ulps, far above what d <= 256 terms can reorder into), and e4m3 values equal except where an input sits within that
distance of a rounding midpoint, where they are one e4m3 step apart (at most 1e-3 of the elements; ~4e-6 expected).

The forward is held to three things, with `emul` = the emulation on the same e4m3 operands and the same key block,
`exact` = fp64 attention on the unquantized inputs:
  1. FlashAttention-3's error-ratio rule against `exact` with `emul` as the yardstick (ratio 2): the kernel is at
     most twice as far from the truth as the FP8 oracle;
  2. rms(kernel - emul) <= rms_ratio * rms(emul - exact): the kernel computes the oracle's function, up to a small
     fraction of the FP8 error itself. The reasons they differ at all: the order of fp32 sums in Q8·K8ᵀ and P8·V8
     (on Hopper also the FP8 tensor cores' narrower accumulator), exp2 of log2-scaled scores against exp, and the
     V descale folded into the rescale. Each moves S or P by ~1e-4 relative at most, which flips an e4m3 rounding
     of P (one step, 6-12%) for a few elements in a thousand. For scale: dropping P's rounding or walking keys in
     another block size moves the output by 0.27-0.42 of the FP8 error (measured, 300 keys, d = 64), and any
     scale or mask error by more than 1;
  3. lse: -inf exactly where the emulation has it, elsewhere within lse_ratio of the emulation's own FP8 error
     (lse sums fp32 P before any e4m3 rounding, so only S's summation order moves it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fa3nn.backends.triton.fp8_launch import default_tile, forward_fp8
from fa3nn.backends.triton.quantize import _walsh_hadamard, quantize_fused
from fa3nn.fp8.hadamard import sylvester_hadamard
from fa3nn.fp8.operands import to_operands, v_from_vt
from fa3nn.fp8.quantize import QuantizedQKV, quantize_qkv_tensors
from fa3nn.fp8.reference import attention_fp8
from fa3nn.masks import Window
from fa3nn.testing import assert_error_ratio, attention_ref, pad, unpad

E4M3 = torch.float8_e4m3fn
ROTATED_RTOL = 1e-5
ROTATED_FLIP_FRACTION = 1e-3
UNMASKED = Window()


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.uint8)


def _e4m3_step(x: torch.Tensor) -> torch.Tensor:
    """Spacing of e4m3 values at |x|: 2^(floor(log2|x|) - 3), and 2^-9 for subnormals."""
    exponent = torch.floor(torch.log2(x.abs().clamp_min(2.0**-6)))
    return torch.exp2(exponent - 3)


def check_quantize(q, k, v, block_q, block_k, rotation=None, tensor_scales=None, cu_seqlens_q=None, cu_seqlens_k=None,
                   max_seqlen_q=None, max_seqlen_k=None, **kwargs):
    """quantize_fused == to_operands(quantize_qkv_tensors) (module docstring for the rotated tolerance). Returns
    the fused operands."""
    args = (q, k, v, block_q, block_k, rotation, tensor_scales, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    got = quantize_fused(*args, **kwargs)
    expect = to_operands(quantize_qkv_tensors(*args), cu_seqlens_k)
    assert (got.block_q, got.block_k) == (expect.block_q, expect.block_k)
    if cu_seqlens_k is None:
        assert got.vt_starts is None and expect.vt_starts is None
    else:
        assert got.vt_starts.dtype == torch.int32 and torch.equal(got.vt_starts, expect.vt_starts)
    for name in ("q", "k", "vt", "q_descale", "k_descale", "v_descale", "amax"):
        actual, wanted = getattr(got, name), getattr(expect, name)
        assert actual.shape == wanted.shape and actual.dtype == wanted.dtype, (
            f"{name}: {actual.dtype}{tuple(actual.shape)} != {wanted.dtype}{tuple(wanted.shape)}")
        assert actual.is_contiguous(), f"{name} is not contiguous"
        rotated = rotation is not None and name in ("q", "k", "q_descale", "k_descale", "amax")
        if not rotated:
            same = torch.equal(_bits(actual), _bits(wanted)) if actual.dtype == E4M3 else torch.equal(
                actual.nan_to_num(123.0), wanted.nan_to_num(123.0)) and torch.equal(actual.isnan(), wanted.isnan())
            assert same, f"{name}: {(actual.float() != wanted.float()).sum().item()} elements differ"
        elif actual.dtype == E4M3:
            a, w = actual.float(), wanted.float()
            differ = (a != w) & ~(a.isnan() & w.isnan())
            assert (differ.float().mean().item() <= ROTATED_FLIP_FRACTION), f"{name}: {differ.sum().item()} differ"
            step = _e4m3_step(torch.maximum(a.abs(), w.abs()))
            assert ((a - w).abs() <= step)[differ].all(), f"{name}: values more than one e4m3 step apart"
        else:
            torch.testing.assert_close(actual, wanted, rtol=ROTATED_RTOL, atol=0, equal_nan=True)
    return got


def _exact(q, k, v, window: Window, softcap, cu_seqlens_q, cu_seqlens_k, mask_q, mask_k):
    """fp64 attention of the unquantized inputs: dense, or packed via the padded inputs and masks."""
    causal = window.right == 0
    window_size = (window.left, -1 if causal else window.right)
    opts = dict(causal=causal, window_size=window_size, softcap=softcap)
    if cu_seqlens_q is None:
        return attention_ref(q.double(), k.double(), v.double(), **opts)
    out, lse = attention_ref(*(pad(x, m).double() for x, m in ((q, mask_q), (k, mask_k), (v, mask_k))),
                             query_padding_mask=mask_q, key_padding_mask=mask_k, **opts)
    return unpad(out, mask_q)[0], unpad(lse.transpose(1, 2), mask_q)[0].transpose(0, 1)


def check_forward(q, k, v, block_q, block_k, window=UNMASKED, softcap=0.0, rotation=None, tensor_scales=None,
                  cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, mask_q=None,
                  mask_k=None, rms_ratio=0.2, lse_ratio=0.1):
    """The Triton FP8 forward on the fused pass's operands, against the emulation (module docstring). Returns
    (rms ratio, lse ratio) as measured."""
    varlen = cu_seqlens_q is not None
    operands = quantize_fused(q, k, v, block_q, block_k, rotation, tensor_scales, cu_seqlens_q, cu_seqlens_k,
                              max_seqlen_q, max_seqlen_k)
    seqlen_k = max_seqlen_k if varlen else k.shape[1]
    block_d = max(32, 1 << (q.shape[-1] - 1).bit_length())
    tile = default_tile(q.device, block_d, operands.block_k, seqlen_k, not window.unmasked)
    scale = q.shape[-1] ** -0.5
    out, lse = forward_fp8(operands.q, operands.k, operands.vt, operands.q_descale, operands.k_descale,
                           operands.v_descale, operands.block_q, operands.block_k, scale, window, cu_seqlens_q,
                           cu_seqlens_k, max_seqlen_q, max_seqlen_k, q.dtype, softcap=softcap, tile=tile,
                           vt_starts=operands.vt_starts)
    total_k = k.shape[0] if varlen else k.shape[1]
    same_operands = QuantizedQKV(operands.q, operands.k, v_from_vt(operands.vt, total_k, cu_seqlens_k),
                                 operands.q_descale, operands.k_descale, operands.v_descale, operands.block_q,
                                 operands.block_k)
    emul, lse_emul = attention_fp8(same_operands, scale, window, softcap, cu_seqlens_q, cu_seqlens_k,
                                   out_dtype=q.dtype, block_n=tile.block_n, sum_rounded_p=False)  # fp32 P's sums
    exact, lse_exact = _exact(q, k, v, window, softcap, cu_seqlens_q, cu_seqlens_k, mask_q, mask_k)
    assert out.shape == emul.shape and out.dtype == q.dtype and lse.shape == lse_emul.shape
    assert_error_ratio(out, exact, emul, "out")
    fp8_error = (emul.double() - exact).pow(2).mean().sqrt().item()
    drift = (out.double() - emul.double()).pow(2).mean().sqrt().item()
    assert drift <= rms_ratio * fp8_error, f"rms(kernel - emul) {drift:.3e} > {rms_ratio} x fp8 error {fp8_error:.3e}"
    assert torch.equal(torch.isinf(lse), torch.isinf(lse_emul)), "lse: -inf rows differ from the emulation"
    finite = torch.isfinite(lse_emul)
    lse_drift = (lse - lse_emul)[finite].abs().max().item() if finite.any() else 0.0
    lse_error = (lse_emul.double() - lse_exact)[finite].abs().max().item() if finite.any() else 0.0
    assert lse_drift <= lse_ratio * lse_error + 1e-6, f"lse: {lse_drift:.3e} > {lse_ratio} x {lse_error:.3e}"
    return drift / max(fp8_error, 1e-30), lse_drift / max(lse_error, 1e-30)


@triton.jit
def _walsh_hadamard_kernel(X, Y, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, LOG2_D: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * BLOCK_D + tl.arange(0, BLOCK_D)[None, :]
    tl.store(Y + offs, _walsh_hadamard(tl.load(X + offs).to(tl.float32), ROWS, BLOCK_D, LOG2_D))


def check_walsh_hadamard(x: torch.Tensor) -> float:
    """The fused pass's fp32 fast Walsh-Hadamard transform of (rows, d) x against fp64 x @ H. Each output is log2(d)
    fp32 additions deep, so |error| <= ((1 + u)^log2(d) - 1) * sum_i |x_i| with u = 2^-24 (elementwise, for any
    summation tree of that depth; a wrong pairing or order is off by O(|x|)). Returns max |error| / that bound."""
    rows, headdim = x.shape
    y = torch.empty(rows, headdim, dtype=torch.float32, device=x.device)
    _walsh_hadamard_kernel[(1,)](x, y, rows, headdim, headdim.bit_length() - 1, num_warps=8)
    exact = x.double() @ sylvester_hadamard(headdim, torch.float64, x.device)
    bound = ((1 + 2.0**-24) ** (headdim.bit_length() - 1) - 1) * x.double().abs().sum(1, keepdim=True)
    ratio = ((y.double() - exact).abs() / bound.clamp_min(1e-300)).max().item()  # a zero row: error 0 exactly
    assert ratio <= 1.0, f"fwht d={headdim}: error {ratio:.2f} x the fp32 bound"
    return ratio

