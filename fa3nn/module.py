"""FlashAttentionV3: a thin nn.Module whose forward is one call into fa3nn's attention path.

It holds the attention configuration (causal, scale, window, softcap, backend, FP8 recipe) and the FP8 recipe's
per-layer state as a submodule `fp8_state`, so that state is part of `state_dict`: the Hadamard signs of
PerTileScaling(incoherent=True), or DelayedScaling's amax_history / scale / skipped_updates.
"""

from __future__ import annotations

from torch import nn

from fa3nn.checks import as_int, check_options
from fa3nn.dispatch import check_backend_name
from fa3nn.fa3_compat import check_attention_chunk
from fa3nn.fp8 import as_recipe, make_state
from fa3nn.fp8.state import switch_state
from fa3nn.interface import attention


class FlashAttentionV3(nn.Module):
    """Exact attention. forward(q, k, v) takes dense (batch, seqlen, nheads, headdim) tensors, or packed
    (total_tokens, nheads, headdim) tensors with cu_seqlens_q/k and max_seqlen_q/k, and returns `out`; sinks= adds
    gpt-oss's per-head sink logits.

    fp8 is None, a recipe (fa3nn.PerTileScaling(), fa3nn.CurrentScaling(), fa3nn.DelayedScaling(...), a Transformer
    Engine DelayedScaling), its name ("per_tile", "current", "delayed") or True (per_tile). layer_idx seeds the
    layer's incoherent-processing signs, so that layers differ. With DelayedScaling, call fa3nn.sync_amax(model)
    once per optimizer step, after its last backward, single process too: it folds the step's amaxes into the
    history (all-reduced under torch.distributed) and is the only thing that changes the scales. attention_chunk
    > 0: chunked attention (Llama 4's local layers; fa3nn.chunks), whose boundaries are read on the host: under
    torch.compile a graph break per call, so fullgraph=True refuses it.
    """

    def __init__(
        self,
        causal: bool = False,
        softmax_scale: float | None = None,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        deterministic: bool = False,
        fp8=None,
        backend: str = "auto",
        layer_idx: int = 0,
        attention_chunk: int = 0,
    ):
        super().__init__()
        softmax_scale, window_size, softcap = check_options(softmax_scale, causal, window_size, softcap,
                                                            deterministic, fp8, backend)
        attention_chunk = check_attention_chunk(attention_chunk)
        check_backend_name(backend)
        layer_idx = as_int("layer_idx", layer_idx, "an int >= 0 (the layer's position)")
        if layer_idx < 0:
            raise ValueError(f"layer_idx must be an int >= 0 (the layer's position), got {layer_idx}")
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.window_size = tuple(window_size)
        self.softcap = softcap
        self.deterministic = deterministic
        self.backend = backend
        self.layer_idx = layer_idx
        self.attention_chunk = attention_chunk
        self._fp8_recipe = as_recipe(fp8)
        self.fp8_state = make_state(self._fp8_recipe, layer_idx)  # a submodule (its buffers), or None

    @property
    def fp8_recipe(self):
        """The layer's FP8 recipe (None: bf16). Assigning one (anything fp8= takes) switches the layer: its
        fp8_state is rebuilt for the new recipe, keeping what still applies (fa3nn.fp8.state.switch_state: a
        delayed-scaling history rescaled with the new margin, Hadamard signs while the seed stays)."""
        return self._fp8_recipe

    @fp8_recipe.setter
    def fp8_recipe(self, fp8):
        recipe = as_recipe(fp8)
        self.fp8_state = switch_state(self.fp8_state, self._fp8_recipe, recipe, self.layer_idx)
        self._fp8_recipe = recipe

    def __setstate__(self, state):
        if "fp8_recipe" in state:  # pickled before fp8_recipe became a property
            state["_fp8_recipe"] = state.pop("fp8_recipe")
        super().__setstate__(state)

    def forward(self, q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, sinks=None):
        """sinks (nheads,): per-head sink logits (gpt-oss; fa3nn.sinks), typically the caller's nn.Parameter."""
        if (cu_seqlens_q is None) != (cu_seqlens_k is None) or (
            cu_seqlens_q is not None and (max_seqlen_q is None or max_seqlen_k is None)
        ):
            raise ValueError(
                "a packed (varlen) call needs all of cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k"
            )
        return self.attend(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks=sinks)[0]

    def attend(self, q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
               sinks=None, **overrides):
        """(out, lse) with this layer's options, FP8 recipe and state, and `sinks` (fa3nn.sinks) or None;
        `overrides` replace softmax_scale, causal, window_size, softcap or attention_chunk for one call (patch_hf
        takes them from the model's own kwargs)."""
        options = dict(
            softmax_scale=self.softmax_scale, causal=self.causal, window_size=self.window_size, softcap=self.softcap,
            attention_chunk=self.attention_chunk,
        )
        options.update(overrides)
        return attention(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, **options,
            deterministic=self.deterministic, backend=self.backend, fp8_recipe=self.fp8_recipe,
            fp8_state=self.fp8_state, training=self.training, sinks=sinks,
        )

    def extra_repr(self) -> str:
        return (
            f"causal={self.causal}, softmax_scale={self.softmax_scale}, window_size={self.window_size}, "
            f"softcap={self.softcap}, backend={self.backend!r}, fp8={self.fp8_recipe!r}, layer_idx={self.layer_idx}"
            + (", deterministic=True" if self.deterministic else "")
            + (f", attention_chunk={self.attention_chunk}" if self.attention_chunk else "")
        )
