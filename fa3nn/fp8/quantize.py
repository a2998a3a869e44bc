"""The quantization pass in PyTorch: bf16/fp16 Q, K, V -> e4m3 Q, K, V plus float32 descales, for any recipe.

This is the CPU/any-device counterpart of the fused GPU pass (one read of Q, K, V; Hadamard rotation fused in;
Vᵀ written per tile for the FP8 P·V GEMM) and the definition that pass is tested against. It returns tensors only:
`QuantizedQKV` is everything an FP8 attention kernel reads. V stays in the (.., seqlen, nheads, headdim) layout here;
the GPU pass writes it transposed per tile, which changes no value.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.fp8.config import CurrentScaling, DelayedScaling, PerTileScaling, Recipe
from fa3nn.fp8.hadamard import HadamardRotation
from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale, quantize_rows, tensor_amax, tile_amax
from fa3nn.fp8.state import DelayedScalingState


@dataclass(frozen=True)
class QuantizedQKV:
    """e4m3 Q, K, V in the caller's layout (Q and K already rotated when incoherent processing is on) and their
    float32 descales in the (batch, nheads, tiles) layout of fa3nn.fp8.scaling: x ~= x8.float() * descale.

    block_q / block_k are the rows per scale tile (>= the longest sequence when there is one scale per
    (batch, head) or per tensor). amax is the (3,) per-tensor amax of Q, K, V as quantized (delayed scaling
    records it; None for the other recipes, which need no history)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    q_descale: torch.Tensor
    k_descale: torch.Tensor
    v_descale: torch.Tensor
    block_q: int
    block_k: int
    amax: torch.Tensor | None = None


def _heads_and_batch(x: torch.Tensor, cu_seqlens: torch.Tensor | None) -> tuple[int, int]:
    batch = x.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
    return batch, x.shape[-2]


def _rows(x: torch.Tensor, cu_seqlens: torch.Tensor | None, max_seqlen: int | None) -> int:
    """The longest sequence: one tile of this many rows is one scale per (batch, head)."""
    return max(1, x.shape[1] if cu_seqlens is None else int(max_seqlen))


def quantize_qkv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    recipe: Recipe,
    state: torch.nn.Module | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
) -> QuantizedQKV:
    """Quantize dense (batch, seqlen, nheads, headdim) or packed (total, nheads, headdim) Q, K, V for `recipe`.

    state is the layer's fa3nn.fp8.make_state(recipe) module: a HadamardRotation for PerTileScaling(incoherent=True),
    a DelayedScalingState for DelayedScaling, else None. This function only reads it; recording the amax of a
    training forward is the caller's (fa3nn.fp8.fp8_attention_forward).
    """
    if isinstance(recipe, PerTileScaling) and recipe.incoherent:
        if not isinstance(state, HadamardRotation):
            raise TypeError(
                "PerTileScaling(incoherent=True) needs the layer's HadamardRotation state "
                f"(fa3nn.fp8.make_state(recipe, layer_idx)); got {type(state).__name__}"
            )
        q, k = state(q), state(k)  # fp32, rotated along headdim
    seqs = ((q, cu_seqlens_q, max_seqlen_q), (k, cu_seqlens_k, max_seqlen_k), (v, cu_seqlens_k, max_seqlen_k))
    amax = None
    if isinstance(recipe, PerTileScaling):
        blocks = (recipe.block_q, recipe.block_k, recipe.block_k)
        amaxes = [tile_amax(x, block, cu, m) for (x, cu, m), block in zip(seqs, blocks)]
        scales = [amax_to_scale(a)[0] for a in amaxes]
    elif isinstance(recipe, CurrentScaling):
        blocks = tuple(_rows(x, cu, m) for x, cu, m in seqs)
        scales = [amax_to_scale(tile_amax(x, block, cu, m))[0] for (x, cu, m), block in zip(seqs, blocks)]
    elif isinstance(recipe, DelayedScaling):
        if not isinstance(state, DelayedScalingState):
            raise TypeError(
                "DelayedScaling needs the layer's DelayedScalingState (fa3nn.fp8.make_state(recipe)); got "
                f"{type(state).__name__}"
            )
        blocks = tuple(_rows(x, cu, m) for x, cu, m in seqs)
        amax = torch.stack([tensor_amax(x) for x in (q, k, v)]).to(state.scale.device)
        per_tensor = state.scale if state.started else state.first_call_scale(amax)
        scales = [
            per_tensor[i].to(x.device).expand(*_heads_and_batch(x, cu), 1) for i, (x, cu, _) in enumerate(seqs)
        ]
    else:
        raise TypeError(f"not an fa3nn FP8 recipe: {type(recipe).__name__}")
    quantized = [quantize_rows(x, s, block, cu) for (x, cu, _), s, block in zip(seqs, scales, blocks)]
    descales = [torch.reciprocal(s) for s in scales]
    return QuantizedQKV(*quantized, *descales, block_q=blocks[0], block_k=blocks[1], amax=amax)


__all__ = ["E4M3_MAX", "QuantizedQKV", "quantize_qkv"]
