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
from fa3nn.fp8.key_blocks import default_block_k
from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale, quantize_rows, tensor_amax, tile_amax
from fa3nn.fp8.state import DelayedScalingState


@dataclass(frozen=True)
class QuantizedQKV:
    """e4m3 Q, K, V in the caller's layout (Q and K already rotated when incoherent processing is on) and their
    float32 descales in the (batch, nheads, tiles) layout of fa3nn.fp8.scaling: x ~= x8.float() * descale.

    block_q / block_k are the rows per scale tile (>= the longest sequence when there is one scale per
    (batch, head) or per tensor). amax is the (3,) per-tensor amax of Q, K, V as quantized (delayed scaling
    records it in its history)."""

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


def quantize_qkv_tensors(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_q: int,
    block_k: int,
    rotation: torch.Tensor | None = None,
    tensor_scales: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
) -> QuantizedQKV:
    """The recipe-free quantization pass, in the primitive arguments a custom op or a kernel launcher takes.

    block_q / block_k  rows per scale tile of Q / of K and V; 0 means one tile per sequence (per (batch, head)).
    rotation           float32 (headdim, headdim) applied to Q and K (x @ rotation) before quantizing, or None.
    tensor_scales      float32 (3,): one scale per tensor for Q, K, V (delayed scaling); the blocks then only
                       say how the descales are laid out. None: scales from the amax of each tile.
    The returned amax is always the (3,) per-tensor amax of Q and K (as rotated) and V: free for tile scaling (a
    max over the tile amaxes), one extra reduction with tensor_scales (which the fused GPU pass does as it casts).
    """
    if rotation is not None:
        # contiguous: on the CPU the GEMM's summation order follows x's strides, and a transposed K (Hugging Face's
        # with use_cache=True) got other e4m3 values than its contiguous copy (tests/test_fp8_api.py)
        q, k = (x.to(torch.float32, memory_format=torch.contiguous_format) @ rotation for x in (q, k))
    seqs = ((q, cu_seqlens_q, max_seqlen_q), (k, cu_seqlens_k, max_seqlen_k), (v, cu_seqlens_k, max_seqlen_k))
    blocks = [block if block > 0 else _rows(x, cu, m) for (x, cu, m), block in zip(seqs, (block_q, block_k, block_k))]
    if tensor_scales is None:
        amaxes = [tile_amax(x, block, cu, m) for (x, cu, m), block in zip(seqs, blocks)]
        scales = [amax_to_scale(a)[0] for a in amaxes]
        amax = torch.stack([a.amax() if a.numel() else a.new_zeros(()) for a in amaxes])
    else:
        tensor_scales = tensor_scales.to(device=q.device, dtype=torch.float32)
        scales = [tensor_scales[i].expand(*_heads_and_batch(x, cu), 1) for i, (x, cu, _) in enumerate(seqs)]
        amax = torch.stack([tensor_amax(x) for x in (q, k, v)])
    quantized = [quantize_rows(x, s, block, cu) for (x, cu, _), s, block in zip(seqs, scales, blocks)]
    descales = [torch.reciprocal(s) for s in scales]
    return QuantizedQKV(*quantized, *descales, block_q=blocks[0], block_k=blocks[1], amax=amax)


def scale_block_k(recipe: Recipe, headdim: int) -> int:
    """Key rows per K/V scale that recipe_arguments gives the recipe at this head dim (0: one scale per sequence),
    without a state: what an FP8 kernel's refusal needs to know before any tensor is quantized."""
    if not isinstance(recipe, PerTileScaling):
        return 0
    return recipe.block_k if recipe.block_k is not None else default_block_k(headdim)


def recipe_arguments(recipe: Recipe, state: torch.nn.Module | None, q, k, v) -> dict:
    """Map a recipe and the layer's state onto quantize_qkv_tensors' primitive arguments (block_q, block_k,
    rotation, tensor_scales): the one place where a recipe becomes numbers a kernel can take (its fast_exp2 goes to
    the kernels as it is: fa3nn.fp8.fp8_attention_forward)."""
    if isinstance(recipe, PerTileScaling):
        rotation = None
        if recipe.incoherent:
            if not isinstance(state, HadamardRotation):
                raise TypeError(
                    "PerTileScaling(incoherent=True) needs the layer's HadamardRotation state "
                    f"(fa3nn.fp8.make_state(recipe, layer_idx)); got {type(state).__name__}"
                )
            rotation = state.rotation(q.shape[-1], q.device)
        return dict(block_q=recipe.block_q, block_k=scale_block_k(recipe, q.shape[-1]), rotation=rotation,
                    tensor_scales=None)
    if isinstance(recipe, CurrentScaling):
        return dict(block_q=0, block_k=0, rotation=None, tensor_scales=None)
    if isinstance(recipe, DelayedScaling):
        if not isinstance(state, DelayedScalingState):
            raise TypeError(
                "DelayedScaling needs the layer's DelayedScalingState (fa3nn.fp8.make_state(recipe)); got "
                f"{type(state).__name__}"
            )
        # (under torch.compile `started` is not read: no host sync in a graph, the selection runs on the device)
        if state._started is True or (not torch.compiler.is_compiling() and state.started):
            scales = state.scale
        else:  # a tensor without history yet is scaled by this call's own per-tensor amax
            amax_now = torch.stack([tensor_amax(x.detach()) for x in (q, k, v)])  # scales carry no gradient
            scales = state.scale_without_history(amax_now.to(state.scale))
        return dict(block_q=0, block_k=0, rotation=None, tensor_scales=scales)
    raise TypeError(f"not an fa3nn FP8 recipe: {type(recipe).__name__}")


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
    arguments = recipe_arguments(recipe, state, q, k, v)
    return quantize_qkv_tensors(q, k, v, **arguments, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


__all__ = ["E4M3_MAX", "QuantizedQKV", "quantize_qkv", "quantize_qkv_tensors", "recipe_arguments"]
