"""Which kernel block a K/V descale tile serves.

The native FP8 kernel's loop walks keys in blocks of KEY_BLOCK (128) or, at head dim 128, of WIDE_KEY_BLOCK (192),
and applies one k and one v descale per block, so a block must lie inside one descale tile. native_key_block says
which block a call gets (kernels/hopper/flash_fwd_fp8_launch.cuh, run_fp8_default, makes the same choice): the
192-key kernel wherever block_k allows it. Both are promoted (each key block's P V added into fp32 O on the CUDA
cores, so the mean of V survives long key ranges); on the H200 the promoted 192-key kernel ran +6-18% over the
promoted 128-key one non-causal from 2k keys on (687 vs 644 TFLOP/s at 4k, 721 vs 612 at 16k), +0-10% causal, and
-4% / -8% at 1k (benchmarks/NOTES.md, 2026-12-01 eighth session). default_block_k is the K/V tile PerTileScaling
uses when its block_k is None (one descale per kernel block); the one-scale-per-sequence recipes (CurrentScaling,
DelayedScaling) reach it too. The emulation (fa3nn.fp8.reference) walks the same blocks as the kernel by default.
"""

from __future__ import annotations

KEY_BLOCK = 128  # keys per block of the native FP8 kernels (kernels/hopper/flash_fwd_fp8.cuh)
WIDE_KEY_BLOCK = {128: 192}  # head dim -> the wider block of its default kernel, where the descale tiles allow


def default_block_k(headdim: int) -> int:
    """K/V rows per descale tile of PerTileScaling(block_k=None): the native kernel's widest block at this head dim.
    Accuracy of 192- against 128-key tiles and blocks at head dim 128 (CPU emulation, per-tile + incoherent, output
    against fp64): scripts/fp8_accuracy.py's outlier inputs at seqlen 8192, 8 heads, seeds 0-2: RMSE 9.09e-3 vs
    9.10e-3; 40 draws of 2 x 512 x 4 heads, two rotations each: SQNR 25.34 vs 25.36 dB (per-draw difference
    -0.01 +- 0.09 dB, 5th percentile 24.77 vs 24.80)."""
    return WIDE_KEY_BLOCK.get(headdim, KEY_BLOCK)


def block_fits_tiles(block: int, block_k: int, max_seqlen_k: int) -> bool:
    """A key block of `block` keys lies inside one K/V descale tile of block_k rows (>= max_seqlen_k: one tile per
    sequence)."""
    return block_k % block == 0 or block_k >= max_seqlen_k


def native_key_block(headdim: int, block_k: int, max_seqlen_k: int) -> int | None:
    """Keys per block of the native kernel serving K/V descale tiles of block_k rows: the wide block where it fits,
    else KEY_BLOCK, else None (no kernel: a block would straddle two tiles)."""
    for block in (WIDE_KEY_BLOCK.get(headdim), KEY_BLOCK):
        if block is not None and block_fits_tiles(block, block_k, max_seqlen_k):
            return block
    return None
