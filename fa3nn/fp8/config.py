"""FP8 recipes as data: which scales a call uses, never how they are computed (that is fa3nn.fp8.scaling).

Three recipes, frozen and validated on construction so a typo fails where it is written, not deep inside a kernel:

    PerTileScaling   one scale per tile of rows: per (batch, head, block_q query rows) for Q and per
                     (batch, kv head, block_k key rows) for K and V; optional incoherent processing (a random-sign
                     Hadamard rotation of Q and K along headdim). The default recipe.
    CurrentScaling   one scale per (batch, head) for each of Q, K, V, from this call's amax.
    DelayedScaling   one scale per tensor for each of Q, K, V, from an amax history kept by the layer
                     (fa3nn.fp8.DelayedScalingState): Transformer Engine's recipe.

Kernels never read these objects: fa3nn.fp8.quantize turns a recipe (plus the layer's state) into e4m3 tensors and
float32 descale tensors, and that is all a kernel sees.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

# FP8 tiles are tensor-core tiles: wgmma's M is 64 rows per warpgroup and every FP8 operand tile is a multiple of 16
# rows, so a scale block that is not a multiple of 16 could never line up with a kernel tile.
TILE_ROW_MULTIPLE = 16


class Format(enum.Enum):
    """Which FP8 formats a recipe uses.

    E4M3    e4m3 everywhere (max 448, 3 mantissa bits): the precise format, for Q, K, V and P.
    HYBRID  Transformer Engine's meaning: e4m3 in the forward, e5m2 (max 57344, 2 mantissa bits) for gradients.
            fa3nn's FP8 is forward-only (the backward runs in bf16: fa3nn.fp8.backward), so here HYBRID
            behaves exactly like E4M3 for Q, K, V and P; it is accepted so TE recipes convert unchanged.
    """

    E4M3 = "E4M3"
    HYBRID = "HYBRID"


# Upper bounds of the recipes' integer fields (a larger value was accepted and failed later, or silently:
# the public API's bad-input audit, 2026-12-05).
# Rows per scale tile: the quantization pass's buffers grow with the tile (2**40 rows asked for terabytes); a tile of
# 65536 rows is already one scale per sequence for any sequence the kernels see in practice (CurrentScaling is that).
MAX_TILE_ROWS = 2**16
# DelayedScaling.margin: scale = 448 / amax / 2**margin puts a tensor's largest value at 448 / 2**margin, so the
# margin moves its values toward e4m3's subnormals (2**-9 ... 2**-6). Output error against fp64 on N(0, 1) inputs
# (d64, 256 keys, CPU emulation): identical for margins 0-8 (powers of two scale exactly), RMSE +0.4% at 10, +10%
# at 12, 3x at 14, 13x at 16 (max error 0.84 against 0.054), NaN from 96.
MAX_MARGIN = 8
# DelayedScaling.amax_history_len: three float32 per entry per layer (Transformer Engine's default is 1024).
MAX_AMAX_HISTORY = 2**16


def _check_int(recipe: str, field: str, value: Any, minimum: int, maximum: int | None = None, unit: str = "",
               why_maximum: str = "") -> None:
    """An int in [minimum, maximum]; a value above the maximum is told the maximum in `unit` and `why_maximum`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{recipe}.{field} must be an int, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{recipe}.{field} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{recipe}.{field} must be <= {maximum}{unit}, got {value}{why_maximum}")


# Which Q and K training's bf16 backward rebuilds the scores from (fa3nn.fp8.backward): the first is the default.
BACKWARD_FROM = ("quantized", "inputs")


def _check_backward_from(recipe: str, value: Any) -> None:
    if value not in BACKWARD_FROM:
        raise ValueError(
            f"{recipe}.backward_from must be one of {BACKWARD_FROM} (which Q and K the bf16 backward rebuilds the "
            f"scores from; fa3nn.fp8.backward says what each costs in accuracy), got {value!r}"
        )


def _check_bool(recipe: str, field: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{recipe}.{field} must be a bool, got {type(value).__name__} ({value!r})")


@dataclass(frozen=True)
class PerTileScaling:
    """One e4m3 scale per tile: (batch, head, block_q query rows) for Q, (batch, kv head, block_k key rows) for
    K and V. Tiles never straddle sequences of a packed batch.

    block_q     query rows per Q scale; the kernel's query tile (FA3's FP8 forward uses 128) or a divisor of it.
    block_k     key rows per K and V scale. None (the default): the native kernel's key block for the call's head
                dim (fa3nn.fp8.key_blocks.default_block_k: 256 at head dim 128, 128 elsewhere), one scale per
                block of its loop. An int: a multiple of 16; the native kernel needs a multiple of its key block
                (128; at head dim 128 a multiple of 256 or 192 gets the faster 256- or 192-key kernel beyond 256
                keys) or one tile per sequence, the Triton FP8 kernel a key tile that divides it.
    incoherent  rotate Q and K along headdim by one random-sign Hadamard matrix before quantizing. Q·Kᵀ is unchanged
                in exact arithmetic; outliers are spread over all of headdim, so e4m3 rounds them less badly
                (FlashAttention-3: RMSE 2.4e-2 -> 9.1e-3 on outlier inputs). The matrix is fixed per layer and
                saved in the layer's state.
    seed        base seed of the random signs; each layer mixes in its layer index (fa3nn.fp8.HadamardRotation).
    fast_exp2   allow the linear exp2 (P8's e4m3 bits straight from the exp2 argument, no MUFU) where a kernel has
                it: the native d128 kernel on 256-key blocks, on half its scores (fa3nn.fp8.key_blocks.FAST_EXP2_EVERY;
                H200: +11..+15% non-causal, +8..+12% causal at 2k-16k keys; output error on N(0, 1) inputs 5.26e-2 ->
                5.38e-2 against fp64). Every other kernel, the Triton FP8 one included, keeps the exact exp2.
    backward_from  "quantized" (the default): training's bf16 backward rebuilds the scores from the quantized Q and
                K, consistent with the FP8 forward's lse and output, so the gradients are those of the attention the
                forward computed; "inputs": from the high-precision Q and K, better where the scores are tame and
                broken where they spread (fa3nn.fp8.backward has the measured table).
    """

    block_q: int = 128
    block_k: int | None = None
    incoherent: bool = True
    seed: int = 0
    fast_exp2: bool = False
    backward_from: str = "quantized"

    def __post_init__(self):
        for field in ("block_q", "block_k"):
            value = getattr(self, field)
            if field == "block_k" and value is None:
                continue
            _check_int("PerTileScaling", field, value, TILE_ROW_MULTIPLE, MAX_TILE_ROWS, " rows",
                       "; for one scale per sequence use fa3nn.CurrentScaling()")
            if value % TILE_ROW_MULTIPLE:
                raise ValueError(
                    f"PerTileScaling.{field} must be a multiple of {TILE_ROW_MULTIPLE} rows (an FP8 tensor-core "
                    f"tile), got {value}; the native kernels use 128"
                )
        _check_bool("PerTileScaling", "incoherent", self.incoherent)
        _check_int("PerTileScaling", "seed", self.seed, 0)
        _check_bool("PerTileScaling", "fast_exp2", self.fast_exp2)
        _check_backward_from("PerTileScaling", self.backward_from)


@dataclass(frozen=True)
class CurrentScaling:
    """One e4m3 scale per (batch, head) for each of Q, K and V (per sequence in a packed batch), computed from this
    call's amax. Needs no state: every call is scaled on its own values.

    fast_exp2, backward_from  as PerTileScaling's.
    """

    fast_exp2: bool = False
    backward_from: str = "quantized"

    def __post_init__(self):
        _check_bool("CurrentScaling", "fast_exp2", self.fast_exp2)
        _check_backward_from("CurrentScaling", self.backward_from)


_AMAX_ALGOS = ("max", "most_recent")


@dataclass(frozen=True)
class DelayedScaling:
    """Transformer Engine's delayed scaling: one scale per tensor for each of Q, K, V, from the amax history that
    the layer keeps in buffers (fa3nn.fp8.DelayedScalingState), updated after every training forward.

    margin             scale = fp8_max / amax / 2**margin: headroom for values growing between updates.
    amax_history_len   how many past amaxes are kept per tensor.
    amax_compute_algo  "max" (of the whole history) or "most_recent" (the last amax) picks the amax behind a scale.
    reduce_amax        when torch.distributed is initialized, all_reduce(MAX) the amaxes over `process_group` so
                       every rank uses one scale; done once per step by fa3nn.fp8.sync_amax, not per layer call.
    fp8_format         Format.E4M3 or Format.HYBRID (the same thing in this forward-only FP8; see Format).
    process_group      the group the amaxes are reduced over; None means the whole world.
    fast_exp2, backward_from  as PerTileScaling's.
    """

    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"
    reduce_amax: bool = True
    fp8_format: Format = Format.HYBRID
    process_group: Any = None
    fast_exp2: bool = False
    backward_from: str = "quantized"

    def __post_init__(self):
        _check_int("DelayedScaling", "margin", self.margin, 0, MAX_MARGIN, "",
                   f": the margin divides every scale by 2**margin, and beyond {MAX_MARGIN} e4m3 flushes a growing "
                   "share of each tensor to its subnormals (RMSE 3x at 14, 13x at 16 on N(0, 1) inputs)")
        _check_int("DelayedScaling", "amax_history_len", self.amax_history_len, 1, MAX_AMAX_HISTORY)
        if self.process_group is not None:
            from torch import distributed as dist

            if dist.is_available() and isinstance(self.process_group, int) and (
                    self.process_group == dist.GroupMember.NON_GROUP_MEMBER):
                raise TypeError(
                    "DelayedScaling.process_group is GroupMember.NON_GROUP_MEMBER: dist.new_group(ranks) returned it "
                    "because this rank is not a member of that process group. Give each rank its own data-parallel "
                    "group (every rank calls dist.new_group for every group, and keeps the one it belongs to)"
                )
            if dist.is_available() and not isinstance(self.process_group, dist.ProcessGroup):
                raise TypeError(
                    "DelayedScaling.process_group must be None (the whole world) or a torch.distributed "
                    f"ProcessGroup (e.g. dist.new_group(ranks)), got {type(self.process_group).__name__} "
                    f"({self.process_group!r})"
                )
        if self.amax_compute_algo not in _AMAX_ALGOS:
            raise ValueError(
                f"DelayedScaling.amax_compute_algo must be one of {_AMAX_ALGOS}, got {self.amax_compute_algo!r}"
            )
        _check_bool("DelayedScaling", "reduce_amax", self.reduce_amax)
        _check_bool("DelayedScaling", "fast_exp2", self.fast_exp2)
        _check_backward_from("DelayedScaling", self.backward_from)
        if isinstance(self.fp8_format, str) and self.fp8_format.upper() in Format.__members__:
            object.__setattr__(self, "fp8_format", Format[self.fp8_format.upper()])
        if not isinstance(self.fp8_format, Format):
            raise ValueError(
                f"DelayedScaling.fp8_format must be one of {[f.name for f in Format]} (a fa3nn.fp8.Format or its "
                f"name), got {self.fp8_format!r}; e5m2-only forwards are not supported"
            )

    def __deepcopy__(self, memo):
        """A copy shares the process group, a handle to the ranks' communicator that cannot be copied
        (copy.deepcopy(model) failed with "cannot pickle ProcessGroup"); every other field is immutable."""
        return dataclasses.replace(self)


Recipe = PerTileScaling | CurrentScaling | DelayedScaling
RECIPES = (PerTileScaling, CurrentScaling, DelayedScaling)

_NAMED = {
    "per_tile": PerTileScaling,
    "current": CurrentScaling,
    "delayed": DelayedScaling,
}
RECIPE_NAMES = tuple(_NAMED)


def from_recipe_name(name: str) -> Recipe:
    """The recipe with default settings for a name: "per_tile" (the default), "current" or "delayed"."""
    if name not in _NAMED:
        raise ValueError(f"unknown FP8 recipe name {name!r}; choose one of {RECIPE_NAMES}")
    return _NAMED[name]()


def _format_name(fp8_format: Any) -> str:
    """TE's Format is an enum whose values are namedtuples; read it by name, falling back to its value / str."""
    for candidate in (getattr(fp8_format, "name", None), getattr(fp8_format, "value", None), fp8_format):
        if isinstance(candidate, str):
            return candidate.rsplit(".", 1)[-1].upper()
    return str(fp8_format).rsplit(".", 1)[-1].upper()


def from_transformer_engine(te_recipe: Any) -> Recipe:
    """Convert a Transformer Engine recipe object by its fields, without importing Transformer Engine.

    A `DelayedScaling` (anything with margin, amax_history_len, amax_compute_algo and fp8_format attributes) maps
    to fa3nn's DelayedScaling, carrying reduce_amax when present; a `Float8CurrentScaling` maps to CurrentScaling.
    A setting fa3nn cannot honor raises rather than being dropped: an e5m2 format, a callable amax_compute_algo or
    a scaling_factor_compute_algo.
    """
    kind = type(te_recipe).__name__
    fields = ("margin", "amax_history_len", "amax_compute_algo", "fp8_format")
    if kind == "Float8CurrentScaling":
        if hasattr(te_recipe, "fp8_format"):
            _te_format(te_recipe.fp8_format)
        return CurrentScaling()
    missing = [f for f in fields if not hasattr(te_recipe, f)]
    if missing:
        raise TypeError(
            f"cannot convert {kind} to an fa3nn FP8 recipe: it lacks {missing}; pass a Transformer Engine "
            f"DelayedScaling or Float8CurrentScaling, or an fa3nn recipe"
        )
    algo = te_recipe.amax_compute_algo
    if not isinstance(algo, str):
        raise ValueError(
            f"Transformer Engine amax_compute_algo {algo!r} is a callable; fa3nn supports only {_AMAX_ALGOS}"
        )
    if getattr(te_recipe, "scaling_factor_compute_algo", None) is not None:
        raise ValueError(
            "Transformer Engine scaling_factor_compute_algo has no fa3nn equivalent: fa3nn computes "
            "scale = fp8_max / amax / 2**margin; set it to None (TE's default computes the same) or express the "
            "change through margin"
        )
    return DelayedScaling(
        margin=te_recipe.margin,
        amax_history_len=te_recipe.amax_history_len,
        amax_compute_algo=algo,
        reduce_amax=getattr(te_recipe, "reduce_amax", True),
        fp8_format=_te_format(te_recipe.fp8_format),
    )


def _te_format(fp8_format: Any) -> Format:
    """fa3nn's Format for a TE fp8_format; E5M2 raises, since the attention forward quantizes to e4m3."""
    fmt = _format_name(fp8_format)
    if fmt not in Format.__members__:
        raise ValueError(
            f"Transformer Engine fp8_format {fmt} has no fa3nn equivalent: the attention forward needs e4m3 "
            f"(use Format.E4M3 or Format.HYBRID)"
        )
    return Format[fmt]


def as_recipe(fp8: Any) -> Recipe | None:
    """Normalize the public `fp8=` argument: None -> None (bf16), True -> PerTileScaling(), a name -> its recipe,
    an fa3nn recipe -> itself, a Transformer Engine recipe -> its conversion."""
    if fp8 is None or fp8 is False:
        return None
    if fp8 is True:
        return PerTileScaling()
    if isinstance(fp8, str):
        return from_recipe_name(fp8)
    if isinstance(fp8, RECIPES):
        return fp8
    if isinstance(fp8, (int, float, dict, list, tuple)):  # bool is handled above; numpy scalars fall through to TE
        raise TypeError(
            f"fp8 must be None, True, False, a recipe name {RECIPE_NAMES}, an fa3nn recipe (fa3nn.PerTileScaling(), "
            f"fa3nn.CurrentScaling(), fa3nn.DelayedScaling()) or a Transformer Engine recipe, got "
            f"{type(fp8).__name__} {fp8!r}"
        )
    try:
        return from_transformer_engine(fp8)
    except TypeError as error:
        raise TypeError(f"fp8={fp8!r} is no FP8 recipe: {error}") from None
