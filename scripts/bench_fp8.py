"""FP8 rows of scripts/bench.py: a backend name with `-fp8` (triton-fp8, hopper-fp8) runs
fa3nn.flash_attn_func(fp8=RECIPE, backend=<name>), with `-fp8-fast` (hopper-fp8-fast) the same recipe with fast_exp2
(FAST_RECIPE), and is measured three ways at each shape:

    fwd (end to end)  the public call: recipe -> fused quantization pass -> FP8 kernel, what a model pays
    kernel            the FP8 forward alone on operands quantized beforehand (fa3nn.dispatch.FP8Path.kernel)
    quant             the fused quantization pass alone, as the call runs it (the Hadamard rotation as
                      fa3nn.backends.triton.quantize.ROTATE_PRECISION says, "fwht") and without rotation
                      (incoherent=False); with --fp8-quant-study also with the rotation in fp32 FMA ("ieee") and as
                      FWHT, and how far the default's e4m3 values and scales are from fp32 FMA's

The check before timing: the error-ratio rule against fp32 attention with the FP8 emulation as the yardstick, and
an SQNR floor of 20 dB (per-tile + incoherent FP8 measures ~25.6 dB on N(0, 1) inputs, tests/test_fp8_reference.py).
"""

from __future__ import annotations

import torch

from fa3nn import PerTileScaling, flash_attn_func
from fa3nn.backends.base import AttnParams
from fa3nn.backends.reference import forward_dense
from fa3nn.fp8 import make_state, sqnr_db
from fa3nn.fp8.quantize import recipe_arguments
from fa3nn.masks import Window
from fa3nn.testing.error_ratio import error_ratio_report

SUFFIX = "-fp8"
FAST_SUFFIX = "-fp8-fast"  # the same recipe with fast_exp2 (hopper-fp8-fast: the linear exp2 where a kernel has it)
RECIPE = PerTileScaling()  # the default FP8 recipe: 128-row scale tiles, incoherent processing
FAST_RECIPE = PerTileScaling(fast_exp2=True)
SQNR_FLOOR_DB = 20.0


def fp8_base(backend: str) -> str | None:
    """'triton-fp8' -> 'triton', 'hopper-fp8-fast' -> 'hopper'; None for a bf16 backend."""
    for suffix in (FAST_SUFFIX, SUFFIX):
        if backend.endswith(suffix):
            return backend[: -len(suffix)]
    return None


def recipe_of(backend: str) -> PerTileScaling:
    return FAST_RECIPE if backend.endswith(FAST_SUFFIX) else RECIPE


def attention_fn(backend: str, base: str | None = None):
    """The public FP8 call of an FP8 row's name (base: another backend under the same recipe)."""
    recipe, base = recipe_of(backend), base or fp8_base(backend)
    return lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal, fp8=recipe, backend=base)


def check(backend: str, q, k, v, causal) -> dict:
    q, k, v = (x[:1, :, :2].detach().contiguous() for x in (q, k, v))
    params = AttnParams(q.shape[-1] ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, False)
    ref, _ = forward_dense(q, k, v, params)
    out = attention_fn(backend)(q, k, v, causal)
    emulated = attention_fn(backend, "reference")(q, k, v, causal)
    passed, report = error_ratio_report(out, ref, emulated)
    drift = (out.double() - emulated.double()).pow(2).mean().sqrt() / (emulated.double() - ref).pow(2).mean().sqrt()
    sqnr = sqnr_db(out, ref)
    return {"sqnr_db": sqnr, "sqnr_emulation_db": sqnr_db(emulated, ref), "drift_vs_fp8_error": drift.item(),
            "error_ratio": report, "ok": passed and sqnr >= SQNR_FLOOR_DB}


def _operands(sets, rotate_precision=None, incoherent=True):
    from fa3nn.backends.triton.quantize import ROTATE_PRECISION, quantize_fused

    rotate_precision = rotate_precision or ROTATE_PRECISION
    state = make_state(RECIPE)
    calls, results = [], []
    for q, k, v, *_ in sets:
        arguments = recipe_arguments(RECIPE, state, q, k, v)
        if not incoherent:
            arguments["rotation"] = None
        calls.append(lambda q=q, k=k, v=v, a=arguments: quantize_fused(q, k, v, **a, rotate_precision=rotate_precision))
        results.append(calls[-1]())
    return calls, results


def _quant_study(result: dict, sets, operands, time_ms, args) -> None:
    """The rotation in fp32 FMA ("ieee") and as FWHT, timed, and how far the default's e4m3 values and scales are from
    fp32 FMA's (bench.py --fp8-quant-study). Off by default: Triton's FMA dot compiles for minutes at d128/d256, and
    an FP8 row with it took 17-50 s of GPU time at d128 and 30-110 s at d256 (2026-12-01 eighth session)."""
    calls, fp32 = _operands(sets, "ieee")
    result["quant_ieee_ms"] = time_ms(calls, args.iters, args.reps)
    calls, fwht = _operands(sets, "fwht")
    result["quant_fwht_ms"] = time_ms(calls, args.iters, args.reps)
    for label, ops in (("default", operands), ("fwht", fwht)):
        for name in ("q", "k"):  # how far a rotation moves the e4m3 values and scales from fp32 FMA's
            a, b = getattr(ops[0], name).float(), getattr(fp32[0], name).float()
            result[f"{label}_vs_ieee_{name}_changed_fraction"] = (a != b).float().mean().item()
            da, db = getattr(ops[0], f"{name}_descale"), getattr(fp32[0], f"{name}_descale")
            result[f"{label}_vs_ieee_{name}_descale_max_rel"] = ((da - db).abs() / db).max().item()


def bench(backend: str, sets, causal: bool, flops: float, time_ms, args) -> dict:
    """Check, then time end to end, kernel only and the quantization pass (module docstring) of the FP8 row
    `backend` (e.g. hopper-fp8)."""
    from fa3nn.dispatch import FP8_FORWARD_PATHS

    base = fp8_base(backend)
    if recipe_of(backend).fast_exp2 and not FP8_FORWARD_PATHS[base].fast_exp2:
        return {"error": f"{backend}: the {base} FP8 kernel has no linear exp2 (fast_exp2 would change nothing)"}
    result: dict = {"check": check(backend, *sets[0][:3], causal)}
    if not result["check"]["ok"]:
        return result
    window = Window.from_args(causal, (-1, -1))
    fn = attention_fn(backend)
    with torch.no_grad():
        ms = time_ms([lambda s=s: fn(s[0], s[1], s[2], causal) for s in sets], args.iters, args.reps)
        result["fwd_ms"], result["fwd_tflops"] = ms, flops / ms / 1e9
        quant_calls, operands = _operands(sets)
        result["quant_ms"] = time_ms(quant_calls, args.iters, args.reps)
        if args.fp8_quant_study:
            _quant_study(result, sets, operands, time_ms, args)
        calls, _ = _operands(sets, incoherent=False)
        result["quant_no_rotation_ms"] = time_ms(calls, args.iters, args.reps)
        kernel = FP8_FORWARD_PATHS[base].kernel
        seqlen = sets[0][0].shape[1]
        scale = sets[0][0].shape[-1] ** -0.5
        fast = {"fast_exp2": True} if recipe_of(backend).fast_exp2 else {}  # (a path without it returned above)

        def run(ops, tile=None):
            extra = {"tile": tile, **fast} if tile is not None else fast
            return kernel(ops.q, ops.k, ops.vt, ops.q_descale, ops.k_descale, ops.v_descale, ops.block_q,
                          ops.block_k, scale, window, None, None, seqlen, seqlen, sets[0][0].dtype, **extra)

        ms = time_ms([lambda o=o: run(o) for o in operands], args.iters, args.reps)
        result["kernel_ms"], result["kernel_tflops"] = ms, flops / ms / 1e9
        if base == "triton" and args.fp8_tile_sweep and not causal and seqlen == max(args.seqlens):
            from fa3nn.backends.triton.fp8_launch import fp8_tiles

            sweep = {}
            for tile in fp8_tiles(max(32, sets[0][0].shape[-1]), operands[0].block_k, seqlen, False):
                try:
                    ms = time_ms([lambda o=o, t=tile: run(o, t) for o in operands], args.iters, args.reps)
                    sweep[str(tile)] = round(flops / ms / 1e9, 1)
                except Exception as exc:  # a tile that does not compile (shared memory) is recorded, not fatal
                    sweep[str(tile)] = f"{type(exc).__name__}: {str(exc)[:120]}"
            result["tile_sweep_tflops"] = sweep
    return result
