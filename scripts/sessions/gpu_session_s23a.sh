#!/usr/bin/env bash
# 2026-12-03 (twenty-third session): the Triton GPU suite after the twenty-second session's fp32 edits (16-bit SASS
# unchanged offline), then the linear exp2 (kernels/hopper/e4m3_exp2.cuh: e4m3 P bits from round(8 x + 56), no
# MUFU) on a quarter / half / all of d128's 256-key FP8 scores (variants 48 / 49 / 50 over the default's kernel 45):
# kernel-only rates against the default in the same run, and the outputs' error against fp64. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s23a
export FA3NN_TRITON_AUTOTUNE=0
stamp triton tests
gpu_pytest tests_triton.log 240 tests/test_triton_gpu.py tests/test_fp8_triton_gpu.py
grep -E "^(FAILED|ERROR)" "$out/tests_triton.log" | head -n 10
stamp bias
timeout 150 python scripts/fp8_accumulation_bias.py --json "$out/bias.json" --headdims 128 --seqlens 4096 16384 \
    --block-k 256 --variants full key_block_256_linear_exp2_quarter key_block_256_linear_exp2_half \
    key_block_256_linear_exp2_all > "$out/bias.log" 2>&1
echo "bias rc $?"; tail -n 14 "$out/bias.log" | cut -c1-220
stamp rates
gpu_fp8_bench rates 280 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 7 \
    --variants key_block_256_linear_exp2_quarter key_block_256_linear_exp2_half key_block_256_linear_exp2_all
stamp done
