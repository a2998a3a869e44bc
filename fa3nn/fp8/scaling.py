"""Scaling math, apart from recipes: amax -> scale, the saturating cast, and amax reductions per tile, per
(batch, head) and per tensor over fa3nn's layouts. Pure tensor functions; nothing here reads a recipe.

Conventions (the same in every kernel):
    scale    multiplies a high-precision value into e4m3 range:  x8 = saturate(x * scale)  (fp32 multiply, RNE cast)
    descale  1 / scale, what a kernel multiplies a GEMM result by: x ~= x8.float() * descale
    scale = fp8_max / amax / 2**margin, so the largest |x| of a tile lands on fp8_max (448 for e4m3).

Descale tensors have one layout for every granularity, (batch, nheads, tiles), with `block` rows per tile:
    dense  (batch, seqlen, nheads, headdim):  tile t of batch b covers rows [t * block, (t + 1) * block) of b.
    packed (total, nheads, headdim) + cu_seqlens: "batch" is the sequence index and tile t covers rows
           [start + t * block, start + (t + 1) * block) of that sequence, so a tile never straddles two sequences;
           tiles = ceil(max_seqlen / block), and a sequence's unused trailing tiles hold 1.0.
Per (batch, head) is the special case block >= seqlen (one tile); per tensor broadcasts one value to that shape.
"""

from __future__ import annotations

import math

import torch

from fa3nn.packed import sequence_positions

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max  # 448.0


def amax_to_scale(
    amax: torch.Tensor, fp8_max: float = E4M3_MAX, margin: int = 0, fallback: torch.Tensor | float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """scale = fp8_max / amax / 2**margin in float32, and a bool mask of the entries whose amax was 0, NaN or Inf.

    Those entries take `fallback` (the previous scale, for delayed scaling; 1.0 otherwise: an all-zero tile
    quantizes exactly at any scale). Never syncs with the host.
    """
    amax = amax.to(torch.float32)
    bad = ~torch.isfinite(amax) | (amax <= 0)
    scale = (fp8_max / 2.0**margin) / torch.where(bad, torch.ones_like(amax), amax)
    # fp8_max / tiny amax overflows to inf in fp32; treat it like a bad amax rather than quantize with inf.
    bad = bad | ~torch.isfinite(scale)
    fallback = torch.as_tensor(fallback, dtype=torch.float32, device=amax.device)
    return torch.where(bad, fallback, scale), bad


def saturated_cast(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = E4M3) -> torch.Tensor:
    """x * scale in float32, clamped to the format's range (so +-Inf and overflow saturate to +-max; NaN stays NaN),
    then rounded to nearest even: what the kernels' cvt instructions do."""
    fp8_max = torch.finfo(dtype).max
    return (x.to(torch.float32) * scale).clamp(-fp8_max, fp8_max).to(dtype)


def tensor_amax(x: torch.Tensor) -> torch.Tensor:
    """max |x| over the whole tensor (0-dim float32); NaN propagates."""
    if x.numel() == 0:
        return torch.zeros((), dtype=torch.float32, device=x.device)
    return x.abs().amax().to(torch.float32)


def _row_amax(x: torch.Tensor) -> torch.Tensor:
    """max |x| over headdim: (..., nheads, headdim) -> (..., nheads) float32."""
    return x.abs().amax(dim=-1).to(torch.float32)


def num_tiles(seqlen: int, block: int) -> int:
    return max(1, math.ceil(seqlen / block))


def _packed_tile_index(cu_seqlens: torch.Tensor, total: int, block: int, tiles: int) -> torch.Tensor:
    """For each packed row, the flat index sequence * tiles + tile-within-sequence (no host sync)."""
    sequence, position = sequence_positions(cu_seqlens, total)
    return sequence * tiles + position // block


def tile_amax(
    x: torch.Tensor, block: int, cu_seqlens: torch.Tensor | None = None, max_seqlen: int | None = None
) -> torch.Tensor:
    """max |x| per tile of `block` rows, per head: float32 (batch, nheads, tiles), the descale layout above.

    x is dense (batch, seqlen, nheads, headdim), or packed (total, nheads, headdim) with int32 cu_seqlens and
    max_seqlen, in which case tiles restart at every sequence start. Empty tiles have amax 0.
    """
    if cu_seqlens is None:
        batch, seqlen, nheads, _ = x.shape
        tiles = num_tiles(seqlen, block)
        rows = torch.nn.functional.pad(_row_amax(x), (0, 0, 0, tiles * block - seqlen))  # pad rows with 0
        return rows.view(batch, tiles, block, nheads).amax(dim=2).transpose(1, 2).contiguous()
    total, nheads, _ = x.shape
    batch = cu_seqlens.numel() - 1
    tiles = num_tiles(max_seqlen, block)
    flat = torch.zeros(batch * tiles, nheads, dtype=torch.float32, device=x.device)
    index = _packed_tile_index(cu_seqlens, total, block, tiles).unsqueeze(1).expand(total, nheads)
    flat.scatter_reduce_(0, index, _row_amax(x), reduce="amax", include_self=True)
    return flat.view(batch, tiles, nheads).transpose(1, 2).contiguous()


def rows_from_tiles(
    per_tile: torch.Tensor, block: int, seqlen_or_total: int, cu_seqlens: torch.Tensor | None = None
) -> torch.Tensor:
    """Expand (batch, nheads, tiles) per-tile values to one per row: dense (batch, seqlen, nheads) or packed
    (total, nheads). The inverse layout map of tile_amax; the emulation and the quantizer use it."""
    batch, nheads, tiles = per_tile.shape
    if cu_seqlens is None:
        rows = per_tile.repeat_interleave(block, dim=-1)[..., :seqlen_or_total]
        return rows.transpose(1, 2)
    index = _packed_tile_index(cu_seqlens, seqlen_or_total, block, tiles)
    return per_tile.transpose(1, 2).reshape(batch * tiles, nheads)[index]


def quantize_rows(
    x: torch.Tensor, scale_tiles: torch.Tensor, block: int, cu_seqlens: torch.Tensor | None = None
) -> torch.Tensor:
    """Saturating e4m3 cast of x with one scale per tile of rows (scale_tiles in the descale layout)."""
    rows = x.shape[1] if cu_seqlens is None else x.shape[0]
    return saturated_cast(x, rows_from_tiles(scale_tiles, block, rows, cu_seqlens).unsqueeze(-1))


def sqnr_db(actual: torch.Tensor, ref: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio 10 log10(sum ref^2 / sum (actual - ref)^2) in dB (torchao's metric)."""
    ref = ref.to(torch.float64)
    noise = (actual.to(torch.float64) - ref).pow(2).sum()
    return (10 * torch.log10(ref.pow(2).sum() / noise)).item()


def mean_drift(actual: torch.Tensor, ref: torch.Tensor) -> float:
    """(mean(actual) - mean(ref)) / mean(ref), in fp64: the share of the output's mean a kernel lost or gained. FP8
    tensor cores accumulating P·V across key blocks lose ~1.2% of V's mean per 1000 keys (benchmarks/NOTES.md,
    2026-12-01 seventh session), which a zero-mean SQNR does not see."""
    actual, ref = actual.to(torch.float64), ref.to(torch.float64)
    return ((actual.mean() - ref.mean()) / ref.mean()).item()
