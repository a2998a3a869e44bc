#!/usr/bin/env bash
# 2026-12-03 (twenty-third session), after s23b: the linear exp2 variants (48-50, centred line; the subnormal line
# removed) against their emulation (fa3nn.fp8.reference linear_exp2_every) on exact scores and for the mean of V,
# then kernel-only rates again with more rounds, and issue 5's bench.py table on the unchanged default. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s23c
stamp tests
gpu_pytest tests_fp8.log 240 tests/test_hopper_fp8.py -k "key_block_256 or mean_of_v"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp rates
gpu_fp8_bench rates 240 --headdims 128 --seqlens 2048 4096 8192 16384 --block-k 256 --reps 11 \
    --variants key_block_256_linear_exp2_quarter key_block_256_linear_exp2_half key_block_256_linear_exp2_all
stamp record
gpu_fp8_record 150 --headdims 128 --seqlens 4096 8192 16384 --reps 5
stamp done
