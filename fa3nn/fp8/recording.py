"""Delayed scaling's two steps inside a training forward, as custom ops that decide at run time whether the forward
is a checkpointed recompute: which scales to quantize with (`forward_scales`) and recording the call's amax
(`record_amax`).

Activation checkpointing reruns a layer's forward inside the backward. That rerun must quantize with the scales the
original forward used (single-process, that forward has already updated `scale`) and must not record its amax again.
The rerun is recognized by the autograd engine running a graph task (torch.utils.checkpoint runs it there in both
its variants; a forward never does). Asked in Python, that question is answered once, when torch.compile traces
the forward, and baked into the graph; so in torch.compile(checkpoint(layer)) the compiled backward recomputed the
quantization from the `scale` buffer as the forward had left it, and in checkpoint(torch.compile(layer)) the
compiled rerun recorded its amax a second time (s58's probe: dq 0.38-0.73 relative off eager from the second step).
A custom op is opaque to the tracer and runs its Python body on every call, so the question is asked where the
answer is true, in whichever graph the partitioner puts the op.

The buffer arithmetic (observe_amax, fold_pending) is here too, in plain functions over tensors, so that the op
bodies and DelayedScalingState's methods (sync_amax's path) are one implementation.
"""

from __future__ import annotations

import torch

from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale

MUTATED = ("amax_history", "scale", "skipped_updates", "pending_amax", "pending", "forward_scale")


def recomputing() -> bool:
    """True inside a backward pass (the autograd engine is running a graph task): a checkpointed recompute."""
    return torch._C._current_graph_task_id() != -1


def observe_amax(pending_amax: torch.Tensor, pending: torch.Tensor, amax_qkv: torch.Tensor) -> None:
    """Max-accumulate a (3,) amax into the pending amax. NaN is recorded as +Inf so it survives a MAX all_reduce
    (NaN comparisons would silently drop it) and is still caught as non-finite by fold_pending."""
    amax = amax_qkv.detach().to(pending_amax)
    amax = torch.where(torch.isnan(amax), torch.full_like(amax, float("inf")), amax)
    pending_amax.copy_(torch.where(pending, torch.maximum(pending_amax, amax), amax))
    pending.fill_(True)


def history_scale(amax_history: torch.Tensor, scale: torch.Tensor, margin: int, most_recent: bool) -> torch.Tensor:
    """(3,) fp8_max / amax / 2**margin, amax the history's max or its newest row (`scale` where that amax is 0, NaN
    or Inf)."""
    history_amax = amax_history[0] if most_recent else amax_history.amax(dim=0)
    return amax_to_scale(history_amax, E4M3_MAX, margin, scale)[0]


def fold_pending(amax_history: torch.Tensor, scale: torch.Tensor, skipped_updates: torch.Tensor,
                 pending_amax: torch.Tensor, pending: torch.Tensor, margin: int, most_recent: bool) -> None:
    """Push the pending amax into the history (row 0) and recompute the scales; a 0/NaN/Inf amax is not pushed,
    that tensor keeps its scale and its skipped_updates count grows. On the device, no host sync."""
    good = pending & torch.isfinite(pending_amax) & (pending_amax > 0)
    shifted = torch.cat([pending_amax.unsqueeze(0), amax_history[:-1]], dim=0)
    amax_history.copy_(torch.where(good, shifted, amax_history))
    scale.copy_(torch.where(good, history_scale(amax_history, scale, margin, most_recent), scale))
    skipped_updates.add_((pending & ~good).to(torch.int64))
    pending_amax.zero_()
    pending.fill_(False)


def _forward_scales_impl(scales: torch.Tensor, forward_scale: torch.Tensor) -> torch.Tensor:
    return (forward_scale if recomputing() else scales).clone()


def _record_amax_impl(amax: torch.Tensor, used_scales: torch.Tensor, amax_history: torch.Tensor, scale: torch.Tensor,
                      skipped_updates: torch.Tensor, pending_amax: torch.Tensor, pending: torch.Tensor,
                      forward_scale: torch.Tensor, update: bool, margin: int, most_recent: bool) -> None:
    if recomputing():
        return
    forward_scale.copy_(used_scales)
    observe_amax(pending_amax, pending, amax)
    if update:
        fold_pending(amax_history, scale, skipped_updates, pending_amax, pending, margin, most_recent)


_forward_scales_op = torch.library.custom_op("fa3nn::fp8_forward_scales", _forward_scales_impl, mutates_args=())
_record_amax_op = torch.library.custom_op("fa3nn::fp8_record_amax", _record_amax_impl, mutates_args=MUTATED)


@_forward_scales_op.register_fake
def _forward_scales_fake(scales, forward_scale):
    return torch.empty_like(scales)


@_record_amax_op.register_fake
def _record_amax_fake(*arguments):
    return None


def forward_scales(scales: torch.Tensor, forward_scale: torch.Tensor) -> torch.Tensor:
    """The (3,) scales this training forward quantizes with: `scales` (the state's, or from the call's own amax
    before the history has one), or in a checkpointed recompute `forward_scale`, those of the forward it reruns.
    The custom op where torch.compile traces, its body directly in eager mode (no dispatch cost)."""
    op = _forward_scales_op if torch.compiler.is_compiling() else _forward_scales_impl
    return op(scales, forward_scale)


def record_amax(amax: torch.Tensor, used_scales: torch.Tensor, amax_history: torch.Tensor, scale: torch.Tensor,
                skipped_updates: torch.Tensor, pending_amax: torch.Tensor, pending: torch.Tensor,
                forward_scale: torch.Tensor, update: bool, margin: int, most_recent: bool) -> None:
    """A training forward's bookkeeping: keep the scales it used (for its recompute), observe its amax and, with
    update=True (no distributed reduction pending), fold it into the history and scales. Nothing in a recompute.
    The custom op where torch.compile traces, its body directly in eager mode."""
    op = _record_amax_op if torch.compiler.is_compiling() else _record_amax_impl
    with torch.no_grad():
        op(amax, used_scales, amax_history, scale, skipped_updates, pending_amax, pending, forward_scale, update,
           margin, most_recent)
