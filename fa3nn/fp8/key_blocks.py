"""Which kernel block a K/V descale tile serves.

The native FP8 kernel's loop walks keys in blocks of KEY_BLOCK (128) or, at head dim 128, of WIDE_KEY_BLOCK (192),
and applies one k and one v descale per block, so a block must lie inside one descale tile. native_key_block says
which block a call gets (kernels/hopper/flash_fwd_fp8_launch.cuh, run_fp8_default, makes the same choice): the
wide block where block_k allows it and the keys are more than SHORT_KEYS (or 128-key blocks don't fit), else 128.
Every default kernel is promoted (each key block's P V added into fp32 O on the CUDA cores, so the mean of V survives
long key ranges), at head dims 64 and 128 with one pingpong turn per block (the fused turn). On the H200 the fused
192-key kernel ran 784 / 785 / 804 TFLOP/s non-causal at 4k / 8k / 16k keys against the fused 128-key one's 731 /
729 / 694 (+7-16%), causal 718 / 788 / 810 against 693 / 735 / 744 (+4-9%); at 2k +5% / -1%; at 1k 591 / 426
against 613 / 464 (-4% / -8%), hence SHORT_KEYS (fused192-h200-20261202-0220, benchmarks/NOTES.md). The 192-key
default also runs every 4th exp2 on the FP32 pipe (+2-9% non-causal, fp8poly-h200-20261202-0259).
default_block_k is the K/V tile PerTileScaling uses when its block_k is None (one descale per kernel block); the
one-scale-per-sequence recipes (CurrentScaling, DelayedScaling) fit every block. The emulation (fa3nn.fp8.reference)
walks the same blocks as the kernel by default.
"""

from __future__ import annotations

KEY_BLOCK = 128  # keys per block of the native FP8 kernels (kernels/hopper/flash_fwd_fp8.cuh)
WIDE_KEY_BLOCK = {128: 192}  # head dim -> the wider block of its default kernel, where the descale tiles allow
SHORT_KEYS = 1024  # up to this many keys (max_seqlen_k) the 128-key kernel is taken where both blocks fit


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
    """Keys per block of the native kernel serving K/V descale tiles of block_k rows: the wide block where it fits
    and the keys are more than SHORT_KEYS, else KEY_BLOCK where it fits, else the wide block where it fits, else None
    (no kernel: a block would straddle two tiles)."""
    wide = WIDE_KEY_BLOCK.get(headdim)
    order = (wide, KEY_BLOCK) if max_seqlen_k > SHORT_KEYS else (KEY_BLOCK, wide)
    for block in order:
        if block is not None and block_fits_tiles(block, block_k, max_seqlen_k):
            return block
    return None
