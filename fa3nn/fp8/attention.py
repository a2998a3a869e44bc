"""One FP8 attention forward call: quantize with the layer's recipe and state, record the amax of a training
forward, run the FP8 attention. Today the attention is the emulation (fa3nn.fp8.reference); the Triton and native
FP8 kernels will take `QuantizedQKV` in its place with the same arguments."""

from __future__ import annotations

import torch

from fa3nn.backends.base import AttnParams, Varlen
from fa3nn.fp8.config import Recipe
from fa3nn.fp8.quantize import quantize_qkv
from fa3nn.fp8.reference import attention_fp8
from fa3nn.fp8.state import DelayedScalingState


def fp8_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    params: AttnParams,
    recipe: Recipe,
    state: torch.nn.Module | None = None,
    varlen: Varlen | None = None,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """out in q's dtype and float32 lse, in the layouts of fa3nn.flash_attn_func / flash_attn_varlen_func.

    state is the layer's fa3nn.fp8.make_state(recipe, layer_idx). With training=True a DelayedScalingState
    observes this call's amax and, unless a distributed reduction is pending (then fa3nn.fp8.sync_amax does it
    once per step), updates its history and scales right away.
    """
    cu_q, cu_k = (None, None) if varlen is None else (varlen.cu_seqlens_q, varlen.cu_seqlens_k)
    max_q, max_k = (None, None) if varlen is None else (varlen.max_seqlen_q, varlen.max_seqlen_k)
    quantized = quantize_qkv(q, k, v, recipe, state, cu_q, cu_k, max_q, max_k)
    if training and isinstance(state, DelayedScalingState):
        state.observe(quantized.amax)
        if not state.needs_reduce():
            state.update()
    return attention_fp8(
        quantized, params.softmax_scale, params.window, params.softcap, cu_q, cu_k, out_dtype=q.dtype
    )
