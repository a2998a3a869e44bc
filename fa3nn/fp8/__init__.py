"""FP8 attention for fa3nn: recipes (config), scaling math, per-layer state, the quantization pass and the
emulated FP8 forward that is the oracle for the FP8 kernels. See fa3nn/fp8/reference.py for e4m3 vs e5m2, the
layout rules and the rounding points."""

from fa3nn.fp8.attention import fp8_attention_forward
from fa3nn.fp8.config import (
    RECIPE_NAMES,
    CurrentScaling,
    DelayedScaling,
    Format,
    PerTileScaling,
    Recipe,
    as_recipe,
    from_recipe_name,
    from_transformer_engine,
)
from fa3nn.fp8.hadamard import HadamardRotation, random_sign_hadamard, sylvester_hadamard
from fa3nn.fp8.quantize import QuantizedQKV, quantize_qkv, quantize_qkv_tensors, recipe_arguments
from fa3nn.fp8.reference import P_SCALE, attention_fp8
from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale, saturated_cast, sqnr_db, tensor_amax, tile_amax
from fa3nn.fp8.state import DelayedScalingState, make_state, sync_amax

__all__ = [
    "E4M3_MAX",
    "P_SCALE",
    "RECIPE_NAMES",
    "CurrentScaling",
    "DelayedScaling",
    "DelayedScalingState",
    "Format",
    "HadamardRotation",
    "PerTileScaling",
    "QuantizedQKV",
    "Recipe",
    "amax_to_scale",
    "as_recipe",
    "attention_fp8",
    "fp8_attention_forward",
    "from_recipe_name",
    "from_transformer_engine",
    "make_state",
    "quantize_qkv",
    "quantize_qkv_tensors",
    "random_sign_hadamard",
    "recipe_arguments",
    "saturated_cast",
    "sqnr_db",
    "sync_amax",
    "sylvester_hadamard",
    "tensor_amax",
    "tile_amax",
]
