"""FP8 inputs as FlashAttention-3 takes them: e4m3 q, k, v the caller quantized, with float32 descales.

    flash_attn_func(q8, k8, v8, q_descale=..., k_descale=..., v_descale=...)   # FlashAttention-3's FP8 call

q8, k8, v8 are float8_e4m3fn in the usual layouts; q_descale, k_descale, v_descale are float32 (batch, nheads_kv),
x ~= x8 * descale (None: 1). q's descale is per K/V head, as in FlashAttention-3: the query heads of a GQA group
share it. The output is bfloat16 (FlashAttention-3's too), lse float32. Forward only: e4m3 tensors have no gradient
here (FlashAttention-3 has no FP8 backward either); to train in FP8 pass bf16 q, k, v with fp8= a recipe, which
quantizes inside and runs the bf16 backward.

The call runs the FP8 forward paths of the recipes (fa3nn.dispatch.FP8_FORWARD_PATHS: the native Hopper kernel, the
Triton one, the emulation) with one descale tile per (sequence, head): what CurrentScaling gives them. What it adds
to a recipe call: V transposed into the kernels' Vᵀ layout (fa3nn.fp8.operands.transpose_v, a copy of V that the
fused quantization pass would have written) and the descales broadcast to the query heads.
"""

from __future__ import annotations

import torch

from fa3nn.checks import type_name
from fa3nn.fp8.quantize import QuantizedQKV
from fa3nn.fp8.scaling import E4M3

OUT_DTYPE = torch.bfloat16  # FlashAttention-3's output dtype for FP8 inputs


def is_fp8_call(q, q_descale, k_descale, v_descale) -> bool:
    """An FP8-input call: q is e4m3, or a descale is given (which then must come with e4m3 inputs)."""
    return (isinstance(q, torch.Tensor) and q.dtype == E4M3) or any(
        d is not None for d in (q_descale, k_descale, v_descale))


def check_fp8_inputs(q, k, v, fp8) -> None:
    """The tensors' FP8 side: all three e4m3, none wanting a gradient, and no recipe besides."""
    dtypes = {name: t.dtype for name, t in (("q", q), ("k", k), ("v", v)) if isinstance(t, torch.Tensor)}
    if any(d != E4M3 for d in dtypes.values()):
        raise TypeError(f"q_descale / k_descale / v_descale describe FP8 inputs: q, k and v must all be "
                        f"torch.float8_e4m3fn (quantized by the caller), got {dtypes}; for bf16 / fp16 inputs drop "
                        "the descales (or pass fp8= a recipe to quantize inside)")
    if fp8 is not None and fp8 is not False:
        raise ValueError(f"fp8={fp8!r} asks fa3nn to quantize, but q, k, v are already e4m3: pass fp8=None")
    wanting = [name for name, t in (("q", q), ("k", k), ("v", v)) if isinstance(t, torch.Tensor) and t.requires_grad]
    if wanting:
        raise ValueError(f"{', '.join(wanting)} require grad, but FP8 inputs have no backward (in FlashAttention-3 "
                         "neither); to train with FP8 attention pass bf16 q, k, v with fp8=fa3nn.PerTileScaling() (the "
                         "forward in FP8, the backward in bf16)")


def check_descale(name: str, descale, batch: int, nheads_kv: int, device: torch.device) -> None:
    if descale is None:
        return
    if not isinstance(descale, torch.Tensor):
        raise TypeError(f"{name} must be a float32 torch.Tensor (batch, nheads_kv) or None, got {type_name(descale)}")
    if descale.dtype != torch.float32 or tuple(descale.shape) != (batch, nheads_kv) or descale.device != device:
        raise ValueError(f"{name} must be float32 of shape (batch, nheads_kv) = ({batch}, {nheads_kv}) on {device}, "
                         f"got {descale.dtype} {tuple(descale.shape)} on {descale.device}")
    if descale.requires_grad:
        raise ValueError(f"{name} requires grad, but FP8 inputs have no backward: pass {name}.detach()")


def check_descales(descales, batch: int, nheads_kv: int, device: torch.device) -> None:
    """(q_descale, k_descale, v_descale), each None or float32 (batch, nheads_kv) on device."""
    for name, descale in zip(("q_descale", "k_descale", "v_descale"), descales):
        check_descale(name, descale, batch, nheads_kv, device)


def descale_tiles(descale: torch.Tensor | None, batch: int, nheads_kv: int, group: int,
                  device: torch.device) -> torch.Tensor:
    """(batch, nheads_kv) descales -> the kernels' (batch, nheads_kv * group, 1) layout (one tile per sequence), a
    K/V head's value repeated for the `group` query heads that read it (group 1 for K and V)."""
    if descale is None:
        return torch.ones(batch, nheads_kv * group, 1, dtype=torch.float32, device=device)
    return descale.repeat_interleave(group, dim=1).unsqueeze(-1).contiguous()


def quantized_inputs(q8, k8, v8, q_descale, k_descale, v_descale, batch: int, max_seqlen_q: int,
                     max_seqlen_k: int) -> QuantizedQKV:
    """The caller's FP8 tensors as the quantization pass would have returned them (V untransposed)."""
    nheads, nheads_kv = q8.shape[-2], k8.shape[-2]
    tiles = [descale_tiles(d, batch, nheads_kv, group, q8.device)
             for d, group in ((q_descale, nheads // nheads_kv), (k_descale, 1), (v_descale, 1))]
    return QuantizedQKV(q8, k8, v8, *tiles, block_q=max(1, max_seqlen_q), block_k=max(1, max_seqlen_k))
