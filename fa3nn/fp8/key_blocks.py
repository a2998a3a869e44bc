"""Which kernel block a K/V descale tile serves.

The native FP8 kernel's loop walks keys in blocks of KEY_BLOCK (128) or, at head dim 128, of one of WIDE_KEY_BLOCKS
(256, 192), and applies one k and one v descale per block, so a block must lie inside one descale tile.
native_key_block says which block a call gets (kernels/hopper/flash_fwd_fp8_launch.cuh, run_fp8_default, makes the
same choice): beyond SHORT_KEYS keys the widest block the descale tiles allow, up to SHORT_KEYS 128-key blocks where
they fit. Every default kernel is promoted (each key block's P V added into fp32 O on the CUDA cores, so the mean of
V survives long key ranges), at head dims 64 and 128 with one pingpong turn per block (the fused turn). On the H200
(kb256-h200-20261202-0758, benchmarks/NOTES.md), kernel only, TFLOP/s non-causal / causal, the fused 256-key kernel
(every exp2 on MUFU) against the fused 192-key one (a quarter of its exp2s as the FP32 polynomial): 827 / 629 against
768 / 605 at 2k, 848 / 736 against 783 / 694 at 4k, 829 / 785 against 784 / 757 at 8k, 844 / 800 against 807 / 758
at 16k (+5-10% / +4-6%); against the fused 128-key kernel 721 / 463 against 618 / 466 at 1k, 590 / 318 against
507 / 325 at 512 (allgpu-h200-20261202-0841). Before it the 192-key kernel had beaten the 128-key one by +7-16% /
+4-9% from 4k (fused192-h200-20261202-0220).
default_block_k is the K/V tile PerTileScaling uses when its block_k is None (one descale per kernel block); the
one-scale-per-sequence recipes (CurrentScaling, DelayedScaling) fit every block. The emulation (fa3nn.fp8.reference)
walks the same blocks as the kernel by default.
"""

from __future__ import annotations

KEY_BLOCK = 128  # keys per block of the native FP8 kernels (kernels/hopper/flash_fwd_fp8.cuh)
# head dim -> the wider blocks of its default kernels, widest first, taken where the descale tiles allow
WIDE_KEY_BLOCKS = {128: (256, 192)}
SHORT_KEYS = 256  # up to this many keys (max_seqlen_k) the 128-key kernel is taken where its block fits


# head dim -> the key block whose kernel takes P's row sums from its P V GEMM (8 rows of ones under V: the sum of
# the e4m3 P8 that multiply V, per block in the tensor cores' accumulator like O's block, so the two share its
# truncation: the mean of V 4x closer at 4k-16k keys, s21b; and the softmax loses its FADD tree: +3..+10% non-causal
# in a same-process A/B, s21d)
P8_ROW_SUM_BLOCKS = {128: 256}


# (head dim, key block) -> every how many P fragment registers take the linear exp2 when a recipe sets fast_exp2
# (kernels/hopper/e4m3_exp2.cuh; run_fp8_default in flash_fwd_fp8_launch.cuh): the 256-key d128 kernel on half its
# scores. H200 (s23c, kernel only, reps 11): 848 -> 978 / 886 -> 1012 / 896 -> 1017 / 933 -> 1052 TFLOP/s
# non-causal at 2k / 4k / 8k / 16k keys, causal 644 -> 718 / 764 -> 854 / 825 -> 920 / 842 -> 930; output error
# against fp64 on N(0, 1) inputs 5.26e-2 -> 5.38e-2 (s23b). Every other kernel keeps MUFU's exp2 under fast_exp2.
FAST_EXP2_EVERY = {(128, 256): 2}


def fast_exp2_every(headdim: int, block_n: int) -> int:
    """The emulation's linear_exp2_every for the native kernel at this head dim and key block under fast_exp2 (0:
    that kernel has no linear exp2, its P8 all come from MUFU's exp2)."""
    return FAST_EXP2_EVERY.get((headdim, block_n), 0)


def p8_row_sums(headdim: int, block_n: int) -> bool:
    """The native kernel for this head dim and key block normalizes by the sum of the rounded P8 (the emulation's
    sum_rounded_p), not of the fp32 P."""
    return P8_ROW_SUM_BLOCKS.get(headdim) == block_n


def default_block_k(headdim: int) -> int:
    """K/V rows per descale tile of PerTileScaling(block_k=None): the native kernel's widest block at this head dim.
    Accuracy of the tiles at head dim 128 (CPU emulation, per-tile + incoherent, output against fp64,
    scripts/fp8_accuracy.py's outlier inputs at seqlen 8192, 8 heads): 256-key tiles and blocks RMSE 9.10e-3 against
    192-key ones' 9.09e-3 over seeds 0-2 (per seed +0.35%, -0.24%, +0.22%); 128-key ones 9.10e-3. 40 draws of
    2 x 512 x 4 heads, two rotations each, 192 against 128: SQNR 25.34 vs 25.36 dB (per-draw difference
    -0.01 +- 0.09 dB, 5th percentile 24.77 vs 24.80)."""
    return WIDE_KEY_BLOCKS.get(headdim, (KEY_BLOCK,))[0]


def block_fits_tiles(block: int, block_k: int, max_seqlen_k: int) -> bool:
    """A key block of `block` keys lies inside one K/V descale tile of block_k rows (>= max_seqlen_k: one tile per
    sequence)."""
    return block_k % block == 0 or block_k >= max_seqlen_k


def native_key_block(headdim: int, block_k: int, max_seqlen_k: int) -> int | None:
    """Keys per block of the native kernel serving K/V descale tiles of block_k rows: the first block that fits of
    the wide ones (widest first) then KEY_BLOCK when the keys are more than SHORT_KEYS, of KEY_BLOCK then the wide
    ones otherwise; None when none fits (a block would straddle two tiles)."""
    wide = WIDE_KEY_BLOCKS.get(headdim, ())
    order = (*wide, KEY_BLOCK) if max_seqlen_k > SHORT_KEYS else (KEY_BLOCK, *wide)
    for block in order:
        if block_fits_tiles(block, block_k, max_seqlen_k):
            return block
    return None
