"""Which Q and K the bf16 backward of an FP8 forward reads: the recipes' `backward_from`.

The backward rebuilds P = exp(S - lse) from its own scores S and the forward's lse, and takes
delta = rowsum(dO * O) from the forward's O. After an FP8 forward, lse and O come from the scores of the quantized Q
and K. Two choices:

    "quantized"  S from the quantized Q and K (dequantized to the inputs' dtype, the recipe's rotation undone:
                 restore): P is consistent with lse and O, and the gradients
                 are those of the attention the forward computed, at the quantized point (what an FP8 backward
                 reading its forward's FP8 tensors computes). Their error follows the forward's own.
    "inputs"     S from the high-precision Q and K: exact scores, but against an lse and an O that are not theirs.
                 Each row of P is off by exp(lse error), which grows with the scores' spread, and delta no longer
                 cancels P * dP.

Measured (scripts/fp8_grad_accuracy.py: CPU emulation, PerTileScaling with the rotation, causal, 256 keys, head dim
128, medians of 3 seeds; SQNR in dB against fp64 gradients, dQ; the FP8 forward's output in brackets; "quantized"
with Q and K restored (s48; the s47 form, dQ and dK rotated back: 27.5 / 24.2 / 19.7 / 7.6 / 1.4):

    score std     1            2            4            16           30
    "quantized"   27.5 (27.1)  24.3 (24.5)  19.9 (22.5)  7.5 (17.2)   2.1 (15.7)
    "inputs"      33.6 (27.1)  25.2 (24.5)  12.0 (22.5)  -22.8 (17.2) -52.9 (15.7)
    bf16 path     55.6         55.6         55.6         55.6         55.7

"inputs" is better where the scores are tame (std <= 2) and collapses where they spread (an error 14x the gradient
at std 16, 440x at 30); "quantized" stays within 10-14 dB of the forward's own error. "quantized" is the default:
its gradients degrade with the forward's accuracy, where "inputs" loses them altogether. It also saves less for the
backward (e4m3 Q and K and their per-tile descales instead of 16-bit Q and K) and adds one pass over them to the
backward (restore: a dequantization with, when the recipe rotates, a (rows x d x d) GEMM on the rotation's +-1
entries).

This module maps the saved e4m3 tensors back to what fa3nn::bwd takes; fa3nn.ops does the autograd plumbing.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch._subclasses.fake_tensor import is_fake  # (loaded with torch itself)

from fa3nn.autocast import autocast_off
from fa3nn.fp8.scaling import num_tiles, rows_from_tiles


def rows_per_tile(block: int, seqlen_or_max: int) -> int:
    """A recipe's rows per scale tile as the quantization pass takes it: block, or 0 = one tile per sequence."""
    return block if block > 0 else max(1, seqlen_or_max)


def descale_shape(x: torch.Tensor, block: int, cu_seqlens: torch.Tensor | None, max_seqlen: int) -> tuple:
    """(batch, heads, tiles) of the descales the quantization pass returns for x (dense or packed): what the FP8
    op's fake implementation gives without running it."""
    batch = x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    rows = x.shape[1] if cu_seqlens is None else max_seqlen
    return batch, x.shape[-2], num_tiles(rows, rows_per_tile(block, rows))


def restore(x8: torch.Tensor, descale: torch.Tensor, block: int, cu_seqlens: torch.Tensor | None, max_seqlen: int,
            rotation: torch.Tensor | None, dtype: torch.dtype, kernel: bool | None = None) -> torch.Tensor:
    """The Q (or K) the FP8 forward's scores were computed from, in the inputs' basis and `dtype`: e4m3 x8 (dense or
    packed) times its per-tile descales (block rows per tile as the recipe gives it, 0 = one per sequence), the
    recipe's rotation undone (x8 @ rotationᵀ; rotation None: none).

    Definition (PyTorch): x8 widened to float32 (exact), times the rotation's +-1 matrix (rotationᵀ / c, entries 0 /
    +-1 exactly, c its entries' magnitude) in float32, times (descale * c) per row in float32, rounded once to
    `dtype`. Without a rotation that is x8 * descale rounded once. The backward takes these Q and K: its scores are
    the forward's (Q̂ K̂ᵀ = x8_q x8_kᵀ scaled, R Rᵀ = I) and its dQ, dK are already the inputs' (undoing the rotation
    here, on e4m3 reads, replaced rotating dQ and dK back after the backward: two (rows x d x d) GEMMs on 16-bit
    gradients and 14 small launches, 0.38 ms at 16k tokens x 16 heads on an H100, s48a).

    kernel: None = the Triton pass (fa3nn.backends.triton.dequantize) on CUDA tensors where triton is installed (an
    optional dependency: the FP8 emulation serves GPU calls without it), the definition elsewhere; True / False force
    one. The pass reads 1 byte and writes 2 per element, with the rotation as a tensor-core product on
    the e4m3 values widened to fp16 (exact) with float32 accumulation: the definition bit for bit without a rotation,
    with one within float32 summation order (tests/test_fp8_triton_interpreter.py)."""
    block = rows_per_tile(block, x8.shape[1] if cu_seqlens is None else max_seqlen)
    signs, c = _signs(rotation, x8.device)
    if _kernel_by_default(x8) if kernel is None else kernel:  # True on the CPU: the tests' TRITON_INTERPRET=1
        if torch.compiler.is_compiling() or is_fake(x8):  # traced (fa3nn::fwd_fp8's backward under torch.compile)
            return torch.ops.fa3nn.restore_rows(x8.view(torch.uint8), descale, cu_seqlens, block, dtype, signs, c)
        return _restore_rows_impl(x8, descale, cu_seqlens, block, dtype, signs, c)  # eager: without the op's dispatch
    rows = x8.shape[1] if cu_seqlens is None else x8.shape[0]
    # contiguous: a multiply by the dense layout's transposed view could not coalesce its dims (s47)
    scale = rows_from_tiles(descale, block, rows, cu_seqlens).contiguous().unsqueeze(-1)
    values = x8.to(torch.float32, memory_format=torch.contiguous_format)  # the GEMM's sums: layout-independent
    if signs is not None:
        with autocast_off(x8.device):  # float32 whatever the caller's autocast (which would cast it to bf16 / fp16)
            values = values @ signs.to(torch.float32)
        scale = scale * c
    return (values * scale).to(dtype)


def _restore_rows_impl(x8: torch.Tensor, descale: torch.Tensor, cu_seqlens: Optional[torch.Tensor], block: int,
                       dtype: torch.dtype, signs: Optional[torch.Tensor], c: Optional[torch.Tensor]) -> torch.Tensor:
    """The Triton pass; x8: e4m3, or its bits as uint8 (the op's: opcheck cannot multiply float8)."""
    from fa3nn.backends.triton.dequantize import dequantize_rows  # imports triton: kernel calls only

    return dequantize_rows(x8.view(torch.float8_e4m3fn), descale, block, cu_seqlens, dtype, signs, c)


# The Triton pass as a custom op, for traced calls: torch.compile's AOTAutograd runs fa3nn::fwd_fp8's backward on
# fake tensors, where a raw Triton launch cannot run (a FakeTensor has no data pointer); the op is one opaque node
# with the shape of its output. Eager calls launch the pass directly (a custom op's dispatch costs host time).
_restore_rows = torch.library.custom_op("fa3nn::restore_rows", _restore_rows_impl, mutates_args=())


@_restore_rows.register_fake
def _(x8, descale, cu_seqlens, block, dtype, signs, c):
    return x8.new_empty(x8.shape, dtype=dtype)


def _kernel_by_default(x8: torch.Tensor) -> bool:
    """restore's kernel=None: the Triton pass on CUDA tensors where triton is installed (fa3nn.backends.triton's
    flag, found once at import without importing triton) and the GPU is one the Triton backend serves (sm_80 on:
    the FP8 emulation, which reaches here on any CUDA GPU, would otherwise hand an older one a kernel Triton may not
    compile for it)."""
    from fa3nn.backends import triton as triton_backend

    return (x8.is_cuda and triton_backend._TRITON_INSTALLED
            and torch.cuda.get_device_capability(x8.device) >= triton_backend.MIN_CAPABILITY)


def _signs(rotation: torch.Tensor | None, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """rotationᵀ / c as fp16 (entries 0 / +-1, exact) and c (float32, one element): the random-sign Hadamard
    rotations of fa3nn.fp8.hadamard have entries 0 or +-c (c = 1 / sqrt(block)). Kept per rotation tensor (each
    layer's is one cached tensor, fa3nn.fp8.hadamard.HadamardRotation.rotation): making them is 5 small launches of
    host time per backward call (s48b: the FP8 training step is host-bound)."""
    if rotation is None:
        return None, None
    if torch.compiler.is_compiling() or is_fake(rotation):  # traced: an identity-keyed cache cannot be
        return _make_signs(rotation.to(device))
    key = (id(rotation), device)
    kept = _SIGNS.get(key)
    if kept is None or kept[0] is not rotation or kept[1] != rotation._version:
        if len(_SIGNS) >= _SIGNS_KEPT:
            _SIGNS.pop(next(iter(_SIGNS)))
        kept = _SIGNS[key] = (rotation, rotation._version, *_make_signs(rotation.to(device)))
    return kept[2], kept[3]


def _make_signs(rotation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rotation = rotation.to(torch.float32)
    c = rotation.abs().amax().reshape(1)
    return (rotation.T / c).to(torch.float16).contiguous(), c


# {(id(rotation), device): (rotation, its _version, signs, c)}: the tensor itself is held so that its id cannot pass
# to another; the oldest is dropped past this many (a model has one rotation per layer)
_SIGNS: dict = {}
_SIGNS_KEPT = 256


def empty_quantized(q: torch.Tensor, k: torch.Tensor, block_q: int, block_k: int, cu_seqlens_q, cu_seqlens_k,
                    max_seqlen_q: int, max_seqlen_k: int, saved: bool) -> tuple[torch.Tensor, ...]:
    """(q8, k8, q_descale, k_descale) placeholders as fa3nn::fwd_fp8 returns them (e4m3 bits as uint8): zeros of
    the real shapes when `saved` (a call with no query or no key, whose backward still reads them), else empty
    tensors (backward_from="inputs" saves none)."""
    if not saved:
        return q.new_empty(0, dtype=torch.uint8), k.new_empty(0, dtype=torch.uint8), *(
            x.new_empty(0, dtype=torch.float32) for x in (q, k))
    return (q.new_zeros(q.shape, dtype=torch.uint8), k.new_zeros(k.shape, dtype=torch.uint8),
            q.new_zeros(descale_shape(q, block_q, cu_seqlens_q, max_seqlen_q), dtype=torch.float32),
            k.new_zeros(descale_shape(k, block_k, cu_seqlens_k, max_seqlen_k), dtype=torch.float32))


__all__ = ["descale_shape", "empty_quantized", "restore", "rows_per_tile"]
