"""FlashAttentionV3: a thin nn.Module whose forward is one call into fa3nn's ops.

It holds the attention configuration (causal, scale, window, softcap, backend, FP8 recipe). Per-layer state that
later features need (the FP8 delayed-scaling amax history) lives in buffers, so it is part of `state_dict`.
"""

from __future__ import annotations

from torch import nn

from fa3nn.checks import check_options
from fa3nn.dispatch import check_backend_name
from fa3nn.interface import flash_attn_func, flash_attn_varlen_func


class FlashAttentionV3(nn.Module):
    """Exact attention. forward(q, k, v) takes dense (batch, seqlen, nheads, headdim) tensors, or packed
    (total_tokens, nheads, headdim) tensors with cu_seqlens_q/k and max_seqlen_q/k, and returns `out`."""

    def __init__(
        self,
        causal: bool = False,
        softmax_scale: float | None = None,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        deterministic: bool = False,
        fp8=None,
        backend: str = "auto",
    ):
        super().__init__()
        check_options(softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
        check_backend_name(backend)
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.window_size = tuple(window_size)
        self.softcap = softcap
        self.deterministic = deterministic
        self.fp8 = fp8
        self.backend = backend

    def forward(self, q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
        options = dict(
            softmax_scale=self.softmax_scale, causal=self.causal, window_size=self.window_size,
            softcap=self.softcap, deterministic=self.deterministic, fp8=self.fp8, backend=self.backend,
        )
        if cu_seqlens_q is None and cu_seqlens_k is None:
            return flash_attn_func(q, k, v, **options)
        if cu_seqlens_q is None or cu_seqlens_k is None or max_seqlen_q is None or max_seqlen_k is None:
            raise ValueError(
                "a packed (varlen) call needs all of cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k"
            )
        return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, **options)

    def extra_repr(self) -> str:
        return (
            f"causal={self.causal}, softmax_scale={self.softmax_scale}, window_size={self.window_size}, "
            f"softcap={self.softcap}, backend={self.backend!r}, fp8={self.fp8!r}"
        )
