"""Which kernel block a K/V descale tile serves.

The native FP8 kernel's loop walks keys in blocks of KEY_BLOCK (128) or, at head dim 128 where 128-key blocks would
straddle two descale tiles, of OTHER_KEY_BLOCK (192), and applies one k and one v descale per block, so a block must
lie inside one descale tile. native_key_block says which block a call gets (kernels/hopper/flash_fwd_fp8_launch.cuh,
run_fp8_default, makes the same choice): 128 keys wherever block_k allows it. Every default kernel is promoted (each
key block's P V added into fp32 O on the CUDA cores, so the mean of V survives long key ranges). At head dim 128 the
128-key kernel is the fused-turn one (one pingpong turn per block); on the H200 it ran 736 / 718 / 735 TFLOP/s
non-causal at 4k / 8k / 16k keys against the promoted 192-key kernel's 685 / 713 / 666 (+1-10%), 696 / 750 / 737
causal against 641 / 686 / 689 (+7-9%), and ahead at 1k-2k too (fusedturn-h200-20261202-0158, benchmarks/NOTES.md).
default_block_k is the K/V tile PerTileScaling uses when its block_k is None (one descale per kernel block); the
one-scale-per-sequence recipes (CurrentScaling, DelayedScaling) reach the 128-key kernels too. The emulation
(fa3nn.fp8.reference) walks the same blocks as the kernel by default.
"""

from __future__ import annotations

KEY_BLOCK = 128  # keys per block of the native FP8 kernels (kernels/hopper/flash_fwd_fp8.cuh)
OTHER_KEY_BLOCK = {128: 192}  # head dim -> the block of its kernel for descale tiles 128-key blocks don't fit


def default_block_k(headdim: int) -> int:
    """K/V rows per descale tile of PerTileScaling(block_k=None): the native kernel's preferred block, 128 keys at
    every head dim. Accuracy of 128- against 192-key tiles at head dim 128 (CPU emulation, per-tile + incoherent,
    output against fp64): scripts/fp8_accuracy.py's outlier inputs at seqlen 8192, 8 heads, seeds 0-2: RMSE 9.10e-3
    vs 9.09e-3; 40 draws of 2 x 512 x 4 heads, two rotations each: SQNR 25.36 vs 25.34 dB (per-draw difference
    0.01 +- 0.09 dB, 5th percentile 24.80 vs 24.77)."""
    return KEY_BLOCK  # the same at every head dim since the fused-turn kernel; callers keep asking per head dim


def block_fits_tiles(block: int, block_k: int, max_seqlen_k: int) -> bool:
    """A key block of `block` keys lies inside one K/V descale tile of block_k rows (>= max_seqlen_k: one tile per
    sequence)."""
    return block_k % block == 0 or block_k >= max_seqlen_k


def native_key_block(headdim: int, block_k: int, max_seqlen_k: int) -> int | None:
    """Keys per block of the native kernel serving K/V descale tiles of block_k rows: KEY_BLOCK where it fits, else
    the head dim's other block where it has one and it fits, else None (no kernel: a block would straddle two
    tiles)."""
    for block in (KEY_BLOCK, OTHER_KEY_BLOCK.get(headdim)):
        if block is not None and block_fits_tiles(block, block_k, max_seqlen_k):
            return block
    return None
