"""Which kernel block a K/V descale tile serves.

The native FP8 kernel's loop walks keys in blocks of KEY_BLOCK (128) or, at head dim 128, of WIDE_KEY_BLOCK (192), and
applies one k and one v descale per block, so a block must lie inside one descale tile. native_key_block says which
block a call gets (kernels/hopper/flash_fwd_fp8_launch.cuh, run_fp8_headdim, makes the same choice): the 192-key
kernel wherever block_k allows it, +8-19% non-causal and +1-14% causal at head dim 128 on the H200
(benchmarks/NOTES.md "192-key blocks"). Recipes reach it with one scale per sequence (CurrentScaling, DelayedScaling)
or PerTileScaling(block_k=192 or a multiple); PerTileScaling's default stays 128-key tiles (the 128-key kernel): at
seqlen 8192 192-key tiles measured the same mean RMSE (9.09e-3 vs 9.10e-3, scripts/fp8_accuracy.py inputs, 8 heads,
seeds 0-2), but on one of seven small draws (2 x 512 x 4 heads) one layer's rotation lost 0.9 dB with them, which
128-key tiles did not show: not enough evidence yet to change the default's numerics. The emulation
(fa3nn.fp8.reference) walks the same blocks as the kernel by default.
"""

from __future__ import annotations

KEY_BLOCK = 128  # keys per block of the native FP8 kernels (kernels/hopper/flash_fwd_fp8.cuh)
WIDE_KEY_BLOCK = {128: 192}  # head dim -> the wider block of its kernel, served where the descale tiles allow it


def native_key_block(headdim: int, block_k: int, max_seqlen_k: int) -> int | None:
    """Keys per block of the native kernel serving K/V descale tiles of block_k rows (>= max_seqlen_k: one tile per
    sequence): the wide block where it fits, else KEY_BLOCK, else None (no kernel: a block would straddle two
    tiles)."""
    for block in (WIDE_KEY_BLOCK.get(headdim), KEY_BLOCK):
        if block is not None and (block_k % block == 0 or block_k >= max_seqlen_k):
            return block
    return None
