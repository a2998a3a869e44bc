"""FP8 recipes: validation on construction, named recipes, and Transformer Engine conversion by fields."""

import enum
from collections import namedtuple

import pytest

from fa3nn.fp8 import (
    RECIPE_NAMES,
    CurrentScaling,
    DelayedScaling,
    Format,
    PerTileScaling,
    as_recipe,
    from_recipe_name,
    from_transformer_engine,
)
from fa3nn.fp8.quantize import scale_block_k


def test_defaults():
    tile = PerTileScaling()
    assert (tile.block_q, tile.block_k, tile.incoherent, tile.seed) == (128, None, True, 0)
    # block_k None: the native kernel's widest key block per head dim (256 at 128, where the fused 256-key kernel
    # measured +5-10% non-causal over the fused 192-key one from 2k keys; fa3nn/fp8/key_blocks.py), else 128
    assert [scale_block_k(tile, d) for d in (64, 128, 256)] == [128, 256, 128]
    assert scale_block_k(PerTileScaling(block_k=256), 128) == 256 and scale_block_k(CurrentScaling(), 128) == 0
    delayed = DelayedScaling()
    assert (delayed.margin, delayed.amax_history_len, delayed.amax_compute_algo, delayed.reduce_amax) == (
        0, 1024, "max", True,
    )
    assert delayed.process_group is None
    assert not (tile.fast_exp2 or delayed.fast_exp2 or CurrentScaling().fast_exp2)  # the exact exp2 by default


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: PerTileScaling(block_q=100), "PerTileScaling.block_q"),
        (lambda: PerTileScaling(block_k=0), "PerTileScaling.block_k"),
        (lambda: PerTileScaling(block_k=128.0), "PerTileScaling.block_k"),
        (lambda: PerTileScaling(incoherent=1), "PerTileScaling.incoherent"),
        (lambda: PerTileScaling(seed=-1), "PerTileScaling.seed"),
        (lambda: DelayedScaling(margin=-1), "DelayedScaling.margin"),
        (lambda: DelayedScaling(margin=True), "DelayedScaling.margin"),
        (lambda: DelayedScaling(amax_history_len=0), "DelayedScaling.amax_history_len"),
        (lambda: DelayedScaling(amax_compute_algo="mean"), "DelayedScaling.amax_compute_algo"),
        (lambda: DelayedScaling(reduce_amax="yes"), "DelayedScaling.reduce_amax"),
        (lambda: DelayedScaling(fp8_format="E5M2"), "DelayedScaling.fp8_format"),
        (lambda: PerTileScaling(fast_exp2=1), "PerTileScaling.fast_exp2"),
        (lambda: CurrentScaling(fast_exp2="yes"), "CurrentScaling.fast_exp2"),
        (lambda: DelayedScaling(fast_exp2=None), "DelayedScaling.fast_exp2"),
        # upper bounds (the public-API audit of 2026-12-05: accepted, then terabyte allocations or noise)
        (lambda: PerTileScaling(block_q=2**40), "PerTileScaling.block_q must be <= 65536 rows, got 1099511627776; "
                                                "for one scale per sequence use fa3nn.CurrentScaling"),
        (lambda: PerTileScaling(block_k=2**17), "PerTileScaling.block_k must be <= 65536"),
        (lambda: DelayedScaling(margin=16), "DelayedScaling.margin must be <= 8"),
        (lambda: DelayedScaling(amax_history_len=10**12), "DelayedScaling.amax_history_len must be <= 65536"),
        (lambda: DelayedScaling(process_group="world"), "DelayedScaling.process_group must be None"),
        (lambda: DelayedScaling(process_group=5), "DelayedScaling.process_group must be None"),
    ],
)
def test_invalid_fields_name_the_field(make, field):
    with pytest.raises((TypeError, ValueError), match=field.replace(".", r"\.")):
        make()


def test_recipes_are_frozen():
    with pytest.raises(AttributeError):
        PerTileScaling().block_q = 64


def test_format_accepts_its_name():
    assert DelayedScaling(fp8_format="e4m3").fp8_format is Format.E4M3
    assert DelayedScaling(fp8_format=Format.HYBRID).fp8_format is Format.HYBRID


def test_from_recipe_name():
    assert RECIPE_NAMES == ("per_tile", "current", "delayed")
    assert from_recipe_name("per_tile") == PerTileScaling()
    assert from_recipe_name("current") == CurrentScaling()
    assert from_recipe_name("delayed") == DelayedScaling()
    with pytest.raises(ValueError, match="per_tile"):
        from_recipe_name("tensorwise")


def test_bounds_are_inclusive():
    assert PerTileScaling(block_q=2**16, block_k=2**16).block_q == 2**16
    assert DelayedScaling(margin=8, amax_history_len=2**16).margin == 8


def test_as_recipe():
    assert as_recipe(None) is None and as_recipe(False) is None
    assert as_recipe(True) == PerTileScaling()
    assert as_recipe("delayed") == DelayedScaling()
    custom = PerTileScaling(block_q=64, incoherent=False)
    assert as_recipe(custom) is custom


# A stand-in for transformer_engine.common.recipe: TE's Format is an enum whose values are namedtuples.
_FormatHelper = namedtuple("_FormatHelper", ["max_fwd", "max_bwd"])


class TEFormat(enum.Enum):
    E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
    E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
    HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)


class TEDelayedScaling:  # the fields Transformer Engine's DelayedScaling exposes, nothing imported
    def __init__(self, margin=0, fp8_format=TEFormat.HYBRID, amax_history_len=1024, amax_compute_algo="max",
                 reduce_amax=True):
        self.margin, self.fp8_format, self.amax_history_len = margin, fp8_format, amax_history_len
        self.amax_compute_algo, self.reduce_amax = amax_compute_algo, reduce_amax
        self.scaling_factor_compute_algo = None


def test_from_transformer_engine_reads_fields():
    te = TEDelayedScaling(margin=2, fp8_format=TEFormat.E4M3, amax_history_len=16, amax_compute_algo="most_recent",
                          reduce_amax=False)
    assert from_transformer_engine(te) == DelayedScaling(
        margin=2, amax_history_len=16, amax_compute_algo="most_recent", reduce_amax=False, fp8_format=Format.E4M3
    )
    assert from_transformer_engine(TEDelayedScaling()).fp8_format is Format.HYBRID
    assert as_recipe(TEDelayedScaling(margin=1)).margin == 1


def test_from_transformer_engine_rejects_what_it_cannot_honor():
    with pytest.raises(ValueError, match="E5M2"):
        from_transformer_engine(TEDelayedScaling(fp8_format=TEFormat.E5M2))
    with pytest.raises(ValueError, match="callable"):
        from_transformer_engine(TEDelayedScaling(amax_compute_algo=lambda history: history.max()))
    with pytest.raises(TypeError, match="lacks"):
        from_transformer_engine(object())


def test_from_transformer_engine_current_scaling():
    class Float8CurrentScaling:
        fp8_format = TEFormat.HYBRID

    assert from_transformer_engine(Float8CurrentScaling()) == CurrentScaling()


def test_from_transformer_engine_refuses_a_scaling_factor_function():
    """A TE scaling_factor_compute_algo was dropped without a word: fa3nn computes its own scale."""
    te = TEDelayedScaling()
    te.scaling_factor_compute_algo = lambda amax, scale, fp8_max, recipe: scale
    with pytest.raises(ValueError, match=r"scaling_factor_compute_algo .* fp8_max / amax / 2\*\*margin"):
        from_transformer_engine(te)


def test_from_transformer_engine_current_scaling_checks_the_format():
    """A Float8CurrentScaling(fp8_format=E5M2) became an e4m3 CurrentScaling without a word."""
    class Float8CurrentScaling:
        def __init__(self, fp8_format):
            self.fp8_format = fp8_format

    with pytest.raises(ValueError, match="E5M2"):
        from_transformer_engine(Float8CurrentScaling(TEFormat.E5M2))
    for fmt in (TEFormat.E4M3, TEFormat.HYBRID):
        assert from_transformer_engine(Float8CurrentScaling(fmt)) == CurrentScaling()


def test_a_group_this_rank_is_not_in_is_named_as_such():
    """dist.new_group(ranks) returns GroupMember.NON_GROUP_MEMBER (-100) on a rank outside `ranks`; the recipe built
    from it on every rank said 'got int (-100)' there, which does not tell the user the rank is not a member."""
    from torch import distributed as dist

    with pytest.raises(TypeError, match=r"not a member of that process group.*its own data-parallel group"):
        DelayedScaling(process_group=dist.GroupMember.NON_GROUP_MEMBER)
