#!/usr/bin/env bash
# 2026-12-03 (eighteenth session), fifth call: what the row max tree costs the d128 FP8 loop on 256-key blocks, as
# an upper bound for taking it off the exp2s' critical path (exp2 with the previous block's running max, the max
# tree beside the exp2s, a rescale or a redo only where the max moved by more than P's headroom; NOTES). Variants:
# key_block_256_fused_turn (one n256 Q K^T, all MUFU), the same without its row max tree (WRONG output, timing only),
# and the default's split S. Kernel only, 256-row K/V tiles. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18e
stamp native
gpu_fp8_bench rowmax 200 --headdims 128 --seqlens 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants key_block_256_split_s key_block_256_fused_turn key_block_256_fused_turn_skip_row_max
stamp done
gpu_archive s18e.tar.gz
