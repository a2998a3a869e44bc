"""One FP8 attention forward call, the one path behind fa3nn.flash_attn_func(fp8=...), FlashAttentionV3(fp8=...)
and patch_hf(fp8=...): turn the recipe and the layer's state into numbers (recipe_arguments), run the `fa3nn::fwd_fp8`
custom op (quantization + FP8 forward; bf16 backward), and record the amax of a training forward.

A training forward quantizes with the layer's current scales and only observes its amax: sync_amax, once per
optimizer step, folds it into the history and updates the scales (fa3nn.fp8.state). So a checkpointed recompute,
eager or under torch.compile, quantizes exactly as its forward did, and observing the same amax again changes
nothing.
"""

from __future__ import annotations

import torch

from fa3nn.backends.base import AttnParams
from fa3nn.fp8.config import Recipe
from fa3nn.fp8.quantize import recipe_arguments
from fa3nn.fp8.state import DelayedScalingState


def fp8_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    params: AttnParams,
    recipe: Recipe,
    state: torch.nn.Module | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    training: bool = False,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """out in q's dtype and lse (float32 for 16-bit inputs; fa3nn.backends.base.saved_lse_dtype, which
    fa3nn.interface rounds for the user), in the layouts of fa3nn.flash_attn_func (dense) or, given cu_seqlens,
    flash_attn_varlen_func (packed). Differentiable: the backward is fa3nn's bf16 backward, from the Q and K the
    recipe's backward_from names (fa3nn.fp8.backward).

    state is the layer's fa3nn.fp8.make_state(recipe, layer_idx). With training=True a DelayedScalingState
    observes this call's amax; fa3nn.fp8.sync_amax folds it into the history once per optimizer step.
    """
    delayed_training = training and isinstance(state, DelayedScalingState) and q.numel() > 0 and k.numel() > 0
    if (delayed_training and not torch.compiler.is_compiling() and state.amax_history.is_inference()
            and not torch.is_inference_mode_enabled()):
        raise RuntimeError(
            "this layer's DelayedScaling state (amax history and scales) was created under torch.inference_mode(), "
            "and inference tensors cannot be updated outside it, which every training forward does: create the "
            "module outside inference_mode (torch.no_grad() is enough for evaluation), or call eval() on it for "
            "forwards that should not update the recipe"
        )
    arguments = recipe_arguments(recipe, state, q, k, v)
    if cu_seqlens_q is None:
        max_seqlen_q, max_seqlen_k = q.shape[1], k.shape[1]
    # fa3nn.ops imports the quantization pass and the emulation from fa3nn.fp8: imported here, at the call, to keep
    # fa3nn.fp8 free of an import cycle (fa3nn.ops is loaded with fa3nn, so this is a lookup)
    from fa3nn.ops import attention_call_fp8

    out, lse, amax, *_ = attention_call_fp8(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params.softmax_scale, params.window.left,
        params.window.right, params.softcap, params.deterministic, backend, arguments["block_q"],
        arguments["block_k"], arguments["rotation"], arguments["tensor_scales"], recipe.fast_exp2, params.sm_margin,
        recipe.backward_from == "quantized",
    )
    if delayed_training:
        state.observe(amax)
        state.check_synced()
    return out, lse
