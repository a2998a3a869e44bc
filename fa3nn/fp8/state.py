"""Per-layer FP8 state that must survive checkpoints and agree across ranks: the delayed-scaling amax history.

A layer using DelayedScaling owns a DelayedScalingState whose buffers are part of its state_dict:

    amax_history     (amax_history_len, 3) float32, columns q, k, v; row 0 is the newest amax
    scale            (3,) float32, the scales the next forward quantizes with
    skipped_updates  (3,) int64, how many updates kept the previous scale because the amax was 0, NaN or Inf

Lifecycle of one training step:
    forward    quantize with `scale` (delayed: computed from earlier steps), then observe(amax of this call), which
               max-accumulates into a pending amax (this rank's alone: a plain tensor attribute, not a buffer, so
               neither state_dict nor DDP's buffer broadcast carries it; several calls per step accumulate, e.g.
               with gradient accumulation or a layer called twice).
    step hook  fa3nn.fp8.sync_amax(model) once per optimizer step, after the step's last backward, on every rank
               (single process too): under torch.distributed with reduce_amax it reduces every layer's pending amax
               in ONE all_reduce(MAX) per process group (not one per layer call); then it updates each layer and
               warns once if updates were skipped (reading that counter is its one host sync).
    update     push the amax into the history (row 0), then scale = fp8_max / amax / 2**margin with amax the max of
               the history ("max") or its newest row ("most_recent"). A 0/NaN/Inf amax is not pushed; that
               tensor keeps its previous scale and its skipped_updates count grows. All on device, no host sync.

Only sync_amax changes the scales, so every forward between two sync_amax calls quantizes with the same ones. That is
what makes activation checkpointing exact, eager or under torch.compile, whichever wraps the other: a recompute in
the backward reads the state its forward read (scales, or before the first update this call's own amax, recomputed
from the same inputs) and observes an amax already observed, which the max leaves as it is; it holds for any number of
forwards before their backwards (a layer called twice, two inputs through one model, pipeline schedules), with no
need to tell a recompute from a forward (a question torch.compile answers once, at trace time: benchmarks/NOTES.md,
fifty-ninth session). A sync_amax between a checkpointed forward and its backward would change
the scales under the recompute: under torch.compile the backward then raises ("modified by an inplace operation"),
eagerly the recompute quantizes with the new scales. A layer that runs many training forwards without sync_amax
warns once (check_synced).

The float buffers stay float32 when the model is cast to bf16/fp16 (moves to another device follow the model).

Before a tensor's first good update its history column is empty (its `scale` is a placeholder 1.0), so the forward
scales that tensor from this call's amax instead (first_call_scale), per tensor: a first step whose V amax was 0, NaN
or Inf leaves V alone without history. `started` says whether all three have one; it is tracked in Python and read
from the device (a host sync) only until they do, so a steady-state training forward never syncs.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import nn

from fa3nn.fp8.config import CurrentScaling, DelayedScaling, PerTileScaling, Recipe
from fa3nn.fp8.hadamard import HadamardRotation
from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale

TENSORS = ("q", "k", "v")
# check_synced warns after this many training forwards of one layer without an update (far above the forwards
# of one step: micro-batches times calls per layer).
UNSYNCED_FORWARDS = 1000


class DelayedScalingState(nn.Module):
    def __init__(self, recipe: DelayedScaling):
        super().__init__()
        if not isinstance(recipe, DelayedScaling):
            raise TypeError(f"DelayedScalingState needs a DelayedScaling recipe, got {type(recipe).__name__}")
        self.recipe = recipe
        self.register_buffer("amax_history", torch.zeros(recipe.amax_history_len, len(TENSORS)))
        self.register_buffer("scale", torch.ones(len(TENSORS)))
        self.register_buffer("skipped_updates", torch.zeros(len(TENSORS), dtype=torch.int64))
        # An amax observed but not yet folded into the history, and whether there is one. This rank's own, so plain
        # tensor attributes, not buffers: DistributedDataParallel(broadcast_buffers=True), its default and
        # accelerate's, broadcasts every buffer (non-persistent ones too) from rank 0 before a forward that follows
        # a synced one, which replaced the other ranks' pending amaxes of earlier micro-batches (gradient
        # accumulation without no_sync) with rank 0's before sync_amax reduced them. _apply and _pending_on_device
        # keep them on the history's device.
        self.pending_amax = torch.zeros(len(TENSORS))
        self.pending = torch.zeros((), dtype=torch.bool)
        self._warned_skips = 0
        # Training forwards since the last update (Python-side, eager calls only), and whether check_synced warned.
        self._forwards_since_update = 0
        self._warned_unsynced = False
        # (id of the process group, number of states) that sync_amax last checked every rank agrees on.
        self._checked_layers: tuple[int, int] | None = None
        # Python-side: whether the history holds an amax yet (None = unknown after load_state_dict; reading it once
        # costs one host sync). Lets a fused quantization pass use `scale` without first computing this call's amax.
        self._started: bool | None = False
        # A module-level function, not a lambda: a lambda cannot be pickled, and the hook travels with the module
        # through torch.save(model) and copy.deepcopy.
        self.register_load_state_dict_post_hook(_forget_started)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        saved = state_dict.get(prefix + "amax_history")
        if isinstance(saved, torch.Tensor) and saved.shape[0] != self.amax_history.shape[0]:
            error_msgs.append(
                f"{prefix}amax_history was saved by a layer with DelayedScaling(amax_history_len={saved.shape[0]}), "
                f"this layer has amax_history_len={self.amax_history.shape[0]}: load it into a layer with the saved "
                f"length, then assign the new recipe to the layer's fp8_recipe (which keeps the newest rows)"
            )
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _apply(self, fn, recurse=True):
        """Moves follow the model, casts do not: after model.half() or model.to(torch.bfloat16) the amax history
        and the scales hold the same float32 values. Casting there and back is not enough: fp16 turns a scale
        above 65504 (a small-valued V) into inf, and bf16 rounds every amax and scale to 8 significant bits."""
        before = {name: buffer for name, buffer in self._buffers.items() if buffer is not None
                  and buffer.dtype == torch.float32}
        super()._apply(fn, recurse)
        for name, original in before.items():
            if self._buffers[name].dtype != torch.float32:  # fn cast it: keep only the move, from the original
                self._buffers[name] = original.to(self._buffers[name].device)
        self._pending_on_device()
        return self

    def _pending_on_device(self) -> None:
        """Move the pending amax and flag (plain attributes, not buffers) to the history's device, when a move did
        not go through _apply (FSDP2's fully_shard moves parameters and buffers one by one). From the meta device
        (to_empty after deferred init) they start empty: nothing pending."""
        device = self.amax_history.device
        if self.pending_amax.device == device:
            return
        if self.pending_amax.is_meta:
            self.pending_amax = torch.zeros(len(TENSORS), device=device)
            self.pending = torch.zeros((), dtype=torch.bool, device=device)
        else:
            self.pending_amax = self.pending_amax.to(device)
            self.pending = self.pending.to(device)

    @property
    def fp8_max(self) -> float:
        return E4M3_MAX  # E4M3 and HYBRID both quantize the forward to e4m3

    def needs_reduce(self, group=None) -> bool:
        """True when amaxes must be all-reduced before they update the history."""
        if not (self.recipe.reduce_amax and dist.is_available() and dist.is_initialized()):
            return False
        return dist.get_world_size(group or self.recipe.process_group) > 1

    @property
    def started(self) -> bool:
        """True once updates have put an amax of each of q, k, v in the history; until then the forward scales a
        tensor without one from this call's amax (scale_without_history), its `scale` being the placeholder 1.0."""
        if self._started is None:
            self._started = bool(self.history_started().all())
        return self._started

    def history_started(self) -> torch.Tensor:
        """(3,) bool on the device: which of q, k, v have an amax in the history."""
        return self.amax_history.amax(dim=0) > 0

    def first_call_scale(self, amax_now: torch.Tensor) -> torch.Tensor:
        """(3,) scales from this call's (3,) amax, for forwards before the first update."""
        scale, _ = amax_to_scale(amax_now, self.fp8_max, self.recipe.margin, self.scale)
        return scale

    def scale_without_history(self, amax_now: torch.Tensor) -> torch.Tensor:
        """(3,) scales for a forward before `started`: `scale` where a tensor has history, else from this call's
        amax. On the device, no host sync (torch.compile traces it)."""
        return torch.where(self.history_started(), self.scale, self.first_call_scale(amax_now))

    @torch.no_grad()
    def observe(self, amax_qkv: torch.Tensor) -> None:
        """Max-accumulate this call's (3,) amax into the pending amax. NaN is recorded as +Inf so it survives a MAX
        all_reduce (NaN comparisons would silently drop it) and is still caught as non-finite by update()."""
        self._pending_on_device()
        amax = amax_qkv.detach().to(self.pending_amax)
        amax = torch.where(torch.isnan(amax), torch.full_like(amax, float("inf")), amax)
        self.pending_amax.copy_(torch.where(self.pending, torch.maximum(self.pending_amax, amax), amax))
        self.pending.fill_(True)

    @torch.no_grad()
    def update(self) -> None:
        """Fold the pending amax into the history and recompute the scales (see the module docstring)."""
        self._pending_on_device()
        amax = self.pending_amax
        good = self.pending & torch.isfinite(amax) & (amax > 0)
        skipped = self.pending & ~good
        shifted = torch.cat([amax.unsqueeze(0), self.amax_history[:-1]], dim=0)
        self.amax_history.copy_(torch.where(good, shifted, self.amax_history))
        self.scale.copy_(torch.where(good, self.history_scale(), self.scale))
        self.skipped_updates.add_(skipped.to(torch.int64))
        self.pending_amax.zero_()
        self.pending.fill_(False)
        self._started = None if self._started is False else self._started  # re-read lazily, once
        self._forwards_since_update = 0

    def history_scale(self) -> torch.Tensor:
        """(3,) fp8_max / amax / 2**margin, amax from the history by the recipe's amax_compute_algo (the current
        scale where that amax is 0, NaN or Inf)."""
        if self.recipe.amax_compute_algo == "max":
            history_amax = self.amax_history.amax(dim=0)
        else:
            history_amax = self.amax_history[0]
        scale, _ = amax_to_scale(history_amax, self.fp8_max, self.recipe.margin, self.scale)
        return scale

    def check_synced(self) -> None:
        """Count an eager training forward and warn once when the layer has run UNSYNCED_FORWARDS of them without
        an update: sync_amax is not being called, so the scales stay as they are (before the first update, every
        forward scales from its own amax) and the history never advances. Under torch.compile this runs at trace
        time only, so a compiled layer does not warn."""
        if torch.compiler.is_compiling():
            return
        # (getattr: a state pickled before these attributes existed lacks them)
        self._forwards_since_update = getattr(self, "_forwards_since_update", 0) + 1
        if self._forwards_since_update >= UNSYNCED_FORWARDS and not getattr(self, "_warned_unsynced", False):
            self._warned_unsynced = True
            warnings.warn(
                f"fa3nn FP8 delayed scaling: this layer ran {self._forwards_since_update} training forwards without "
                f"fa3nn.sync_amax(model), which is what folds their amaxes into the history and updates the scales: "
                f"call it once per optimizer step, after the step's last backward, on every rank (single process "
                f"too). Until then the layer quantizes with unchanged scales (before the first update, each call "
                f"with its own amax). This warning is shown once.",
                stacklevel=_user_frame_level(),
            )

    def warn_if_skipped(self) -> None:
        """Warn once per state when updates were skipped (reads the counter: a host sync, so only the step hook
        calls it)."""
        total = int(self.skipped_updates.sum())
        if total > 0 and self._warned_skips == 0:
            self._warned_skips = total
            counts = dict(zip(TENSORS, self.skipped_updates.tolist()))
            warnings.warn(
                f"fa3nn FP8 delayed scaling: an amax was 0, NaN or Inf, so the previous scale was kept "
                f"(skipped updates so far per tensor: {counts}); check the inputs for non-finite values. "
                f"This warning is shown once; read .skipped_updates for the running count.",
                stacklevel=3,
            )

    def extra_repr(self) -> str:
        return f"recipe={self.recipe!r}"


def _user_frame_level() -> int:
    """warnings.warn's stacklevel, for a call from a method here, of the first frame outside fa3nn, torch and
    transformers: the training loop's call of the layer or the model, however deep the modules nest."""
    packages = [sys.modules[name] for name in ("fa3nn", "torch", "transformers") if name in sys.modules]
    skip = tuple(os.path.dirname(package.__file__) + os.sep for package in packages)
    frame, level = sys._getframe(1), 1  # the method that warns: level 1
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def _forget_started(state: DelayedScalingState, incompatible_keys) -> None:
    """load_state_dict post hook: the loaded history may or may not hold an amax; `started` reads it once. The
    scales are recomputed from the loaded history with this layer's recipe (a checkpoint saved under another margin
    or amax_compute_algo kept its own scales until the next update); where a tensor has no history yet its loaded
    scale, the placeholder, stays."""
    state._started = None
    with torch.no_grad():
        state.scale.copy_(torch.where(state.history_started(), state.history_scale(), state.scale))


def make_state(recipe: Recipe | None, layer_idx: int = 0) -> nn.Module | None:
    """The per-layer state a recipe needs (a module for its buffers), or None when it needs none.
    layer_idx seeds the incoherent-processing signs so that layers differ."""
    if isinstance(recipe, DelayedScaling):
        return DelayedScalingState(recipe)
    if isinstance(recipe, PerTileScaling) and recipe.incoherent:
        return HadamardRotation(recipe.seed, layer_idx)
    if recipe is None or isinstance(recipe, (PerTileScaling, CurrentScaling)):
        return None
    raise TypeError(f"not an fa3nn FP8 recipe: {type(recipe).__name__}")


def switch_state(state: nn.Module | None, old_recipe: Recipe | None, recipe: Recipe | None,
                 layer_idx: int = 0) -> nn.Module | None:
    """The state of a layer whose recipe changes from old_recipe to recipe (FlashAttentionV3.fp8_recipe = ...),
    on the old state's device. DelayedScaling to DelayedScaling keeps the newest amax_history_len rows of the history
    and skipped_updates, and rescales them with the new margin and amax_compute_algo; a PerTileScaling(incoherent=True)
    keeps its Hadamard signs (loaded ones included) while the seed stays; anything else starts afresh (make_state)."""
    new = make_state(recipe, layer_idx)
    if isinstance(new, HadamardRotation) and isinstance(state, HadamardRotation) and old_recipe.seed == recipe.seed:
        return state
    if new is not None and state is not None:
        new = new.to(next(state.buffers()).device)
    if isinstance(new, DelayedScalingState) and isinstance(state, DelayedScalingState):
        with torch.no_grad():
            rows = min(len(new.amax_history), len(state.amax_history))
            new.amax_history[:rows].copy_(state.amax_history[:rows])
            new.skipped_updates.copy_(state.skipped_updates)
            new.scale.copy_(torch.where(new.history_started(), new.history_scale(), state.scale))
        new._started = None
    return new


def _collect(modules_or_states) -> list[DelayedScalingState]:
    if isinstance(modules_or_states, nn.Module):
        modules_or_states = [modules_or_states]
    if isinstance(modules_or_states, (str, bytes)) or not hasattr(modules_or_states, "__iter__"):
        raise TypeError("sync_amax takes a model (an nn.Module) or an iterable of modules / DelayedScalingStates, "
                        f"got {type(modules_or_states).__name__}")
    states: list[DelayedScalingState] = []
    for item in modules_or_states:
        if not isinstance(item, nn.Module):
            raise TypeError(f"sync_amax: every item must be an nn.Module (a model, a layer or a DelayedScalingState), "
                            f"got {type(item).__name__}")
        found = item.modules()
        states += [m for m in found if isinstance(m, DelayedScalingState) and m not in states]
    return states


def _check_same_layers(members: list[DelayedScalingState], group) -> None:
    """Raise on every rank of `group` when its ranks hold different numbers of states to reduce: their packed tensors
    would differ in size, which gloo answers by aborting the process and NCCL by hanging or mixing one layer's amaxes
    into another's. One all_reduce of two numbers and one host read, only the first time a rank reduces these states
    over this group (each state remembers it); a rank whose layers change later is checked again only there."""
    mark = (id(group), len(members))
    if all(getattr(state, "_checked_layers", None) == mark for state in members):  # older pickles lack it
        return
    counts = torch.tensor([len(members), -len(members)], dtype=torch.float32, device=members[0].amax_history.device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX, group=group)
    most, fewest = int(counts[0]), -int(counts[1])
    if most != fewest:
        raise RuntimeError(
            f"sync_amax: the ranks of the process group hold different numbers of DelayedScaling layers to reduce "
            f"(this rank {len(members)}, the group {fewest} to {most}), so their amaxes cannot be reduced layer by "
            f"layer. Every rank of a group must pass the same layers: with pipeline parallelism reduce over the "
            f"data-parallel group (DelayedScaling(process_group=...) or sync_amax(model, group=...))"
        )
    for state in members:
        state._checked_layers = mark


def sync_amax(modules_or_states: nn.Module | Iterable, group=None) -> int:
    """The once-per-step hook for delayed scaling: call it once per optimizer step, after the step's last backward
    (before or after optimizer.step()), on every rank (single process too), with the same model; returns the number
    of amax reductions made (one per process group). Only this call changes the scales (module docstring: that is
    what keeps checkpointed recomputes exact), so a call between a checkpointed forward and its backward is wrong.

    Finds every DelayedScalingState in the given modules (in module order, which is the same on every rank) and,
    for those that need a reduction, concatenates their pending amaxes plus a pending flag into one tensor per
    process group (`group` overrides each recipe's process_group) and does ONE all_reduce(MAX) on it; then updates
    every state. A layer that ran on one rank only still gets the global amax; a layer that ran on no rank is left
    as is. All states warn once if updates were skipped. The first reduction of a set of states over a group is
    preceded by one all_reduce of the number of states, so that ranks holding different layers raise a RuntimeError
    on every rank instead of aborting in gloo or hanging in NCCL (_check_same_layers).
    """
    states = _collect(modules_or_states)
    by_group = defaultdict(list)
    for state in states:
        if state.needs_reduce(group):
            by_group[group or state.recipe.process_group].append(state)
        else:
            state.update()
    for pg, members in by_group.items():
        _check_same_layers(members, pg)
        for state in members:
            state._pending_on_device()
        packed = torch.stack([torch.cat([s.pending_amax, s.pending.to(s.pending_amax).unsqueeze(0)]) for s in members])
        dist.all_reduce(packed, op=dist.ReduceOp.MAX, group=pg)
        for state, row in zip(members, packed):
            state.pending_amax.copy_(row[: len(TENSORS)])
            state.pending.copy_(row[len(TENSORS)] > 0)
            state.update()
    for state in states:
        state.warn_if_skipped()  # its stacklevel names sync_amax's caller: no decorator wrapper in between
    return len(by_group)
