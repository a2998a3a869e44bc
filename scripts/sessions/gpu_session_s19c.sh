#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), third call, on the new defaults (each row's max from 3-input integer maxes: the
# FP8 d128 kernel on 256-key blocks and the bf16 d128 forward; s19b measured them). (1) Every FP8 GPU test and the
# native bf16 forward's (tests/test_hopper.py), with the new all-negative-score tests. (2) Issue 5's table from this
# code: bench.py FP8 rows beside our bf16 Hopper forward and cuDNN, d128 / d256 (the Triton FP8 kernel is unchanged
# since s18b); cuDNN's FP8 forward beside ours. (3) The bf16 forward, default (integer maxes at d128) against
# float_max, again. Carry build and .whl (cudnn-frontend 1.32).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19c
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
gpu_pytest tests_hopper.log 240 tests/test_hopper.py
grep -E "^(FAILED|ERROR)" "$out/tests_hopper.log" | head -n 10
stamp bench
gpu_fp8_record 200 --headdims 128 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --reps 5
stamp cudnn
gpu_cudnn_fp8 110 --headdims 128 256 --seqlens 2048 4096 8192 16384 --iters 10 --reps 3
stamp bf16
timeout 100 python scripts/bench_hopper.py --json "$out/bf16.json" --headdims 128 \
    --seqlens 2048 4096 8192 16384 --variants full float_max --ablation-seqlens --reps 5 > "$out/bf16.log" 2>&1
echo "bf16 rc $?"; sed -n '/^| hdim/,$p' "$out/bf16.log"
stamp done
gpu_archive s19c.tar.gz
