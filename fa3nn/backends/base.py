"""What every backend is: a name, a refusal test, and forward/backward entry points.

Backends never see recipe objects or user kwargs: they get tensors plus an `AttnParams` and, for packed batches,
a `Varlen`. They return fresh tensors (the custom op owns allocation semantics).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fa3nn.masks import Window


def lse_dtype(dtype: torch.dtype) -> torch.dtype:
    """The lse users get: float32, except float64 for float64 inputs (so gradcheck sees exact values)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def saved_lse_dtype(dtype: torch.dtype) -> torch.dtype:
    """The lse fa3nn's ops return, save and hand to the backward: lse_dtype's, but float64 for float32 inputs too
    (fa3nn.interface rounds it to float32 for the user). The backward recomputes P = exp(score - lse), so lse's
    error multiplies a whole row of P: rounded to float32 (|lse| ~ 2-10, half an ulp 1.2e-7..4.8e-7) it is as
    large as all of plain fp32 PyTorch's error (benchmarks/NOTES.md, "fp32 backward"). 16-bit inputs round P to
    16 bits before the matmuls, far above it."""
    return torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32


@dataclass(frozen=True)
class AttnParams:
    """The numerics of one attention call, already normalized (scale resolved, causal folded into the window), and
    sm_margin, the one scheduling request a backend may honour (FlashAttention-3's: SMs to leave free for kernels
    that overlap attention; Backend.honours_sm_margin)."""

    softmax_scale: float
    window: Window
    softcap: float
    deterministic: bool
    sm_margin: int = 0


@dataclass(frozen=True)
class Varlen:
    """Packed-batch metadata. `seqstarts_*` are host copies of cu_seqlens, read once by the dispatcher after it
    validated them (backends that launch one grid over all sequences need only the tensors)."""

    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int
    seqstarts_q: tuple[int, ...]
    seqstarts_k: tuple[int, ...]

    @property
    def batch(self) -> int:
        return len(self.seqstarts_q) - 1


@dataclass(frozen=True)
class AttnCall:
    """What a backend needs to decide whether it can serve a call (no tensor data, so it is cheap and hashable)."""

    device_type: str
    capability: tuple[int, int] | None  # CUDA compute capability, None off CUDA
    dtype: torch.dtype
    headdim: int
    headdim_v: int
    nheads: int
    nheads_kv: int
    varlen: bool
    window: Window
    softcap: float
    deterministic: bool
    has_dlse: bool = False

    @staticmethod
    def of(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, params: AttnParams, varlen: bool) -> AttnCall:
        capability = torch.cuda.get_device_capability(q.device) if q.device.type == "cuda" else None
        return AttnCall(
            device_type=q.device.type,
            capability=capability,
            dtype=q.dtype,
            headdim=q.shape[-1],
            headdim_v=v.shape[-1],
            nheads=q.shape[-2],
            nheads_kv=k.shape[-2],
            varlen=varlen,
            window=params.window,
            softcap=params.softcap,
            deterministic=params.deterministic,
        )


class Backend:
    """Base class; subclasses set `name` and implement the four methods."""

    name: str = "?"
    # Whether this backend's kernels leave AttnParams.sm_margin SMs free (fa3nn.fa3_compat.note_sm_margin warns once
    # about the calls whose backend does not).
    honours_sm_margin: bool = False
    # Whether backward() is differentiable torch ops, so that gradients taken with create_graph=True (a gradient
    # penalty, gradgradcheck) can be differentiated again; a kernel's gradients carry no autograd history
    # (fa3nn.ops refuses their double backward rather than drop the second-order term).
    twice_differentiable: bool = False

    def refusal(self, call: AttnCall, backward: bool) -> str | None:
        """None if this backend can serve the call (forward, or backward when `backward`), else the reason."""
        raise NotImplementedError

    def forward(self, q, k, v, params: AttnParams, varlen: Varlen | None, sinks: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(out, lse); with `sinks` (nheads,) those of the softmax with a sink per head (fa3nn.sinks): in the kernel,
        or fa3nn.sinks.apply_sinks on the kernel's outputs."""
        raise NotImplementedError

    def backward(self, dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None):
        raise NotImplementedError

    def backward_with_sinks(self, dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None,
                            sinks: torch.Tensor) -> tuple:
        """(dq, dk, dv, dsinks) after a forward with sinks (its out and lse include them, fa3nn.sinks): the
        backward, then the sinks' gradient in one more pass over dout and out; a backend whose backward computes
        rowsum(dout * out) itself overrides this to reuse it."""
        from fa3nn.sinks import sinks_gradient  # (here: fa3nn.sinks -> fa3nn.checks -> fa3nn.fp8 -> this module)

        return (*self.backward(dout, q, k, v, out, lse, dlse, params, varlen),
                sinks_gradient(dout, out, lse, dlse, sinks))
