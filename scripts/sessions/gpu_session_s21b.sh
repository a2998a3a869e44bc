#!/usr/bin/env bash
# 2026-12-03 (twenty-first session): P's row sums from the P V GEMM in d128's 256-key FP8 kernel (variant 45,
# key_block_256_mma_row_sum: the softmax's 126 FADDs per block gone, P V as m64n136k32 over Vt panels with 8 rows of
# ones; two K/V stages, as its control 46), against the default (37) and 46 in the same run; its accuracy against the
# emulation and fp64 for V with and without a mean (the block sums truncate in the tensor cores like O's blocks).
# Second form (s21c): variant 47, the same sums from m64n8k32 GEMMs over one tile of ones, on three stages.
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21b
stamp bias
timeout 120 python scripts/fp8_accumulation_bias.py --json "$out/bias.json" --headdims 128 --seqlens 4096 16384 \
    --block-k 256 --variants full key_block_256_mma_row_sum key_block_256_mma_row_sum_apart \
    > "$out/bias.log" 2>&1
echo "bias rc $?"; tail -n 12 "$out/bias.log" | cut -c1-220
stamp rates
gpu_fp8_bench rates 300 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 11 \
    --variants key_block_256_split_s_int_max_two_stages key_block_256_mma_row_sum key_block_256_mma_row_sum_apart
stamp done
