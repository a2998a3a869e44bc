#!/usr/bin/env bash
# 2026-12-03 (twenty-first session): d128's FP8 default on 256-key blocks is now the row-sum-by-MMA kernel (45) on
# two K/V stages, and the emulation sums the rounded P8 there. Every FP8 GPU test on this build; the A/B against
# the build before (build/before, HEAD~ of this change) in one process; issue 5's bench.py table and cuDNN's FP8
# beside it. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21d
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp ab
gpu_fp8_bench ab 200 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 8 \
    --variants --compare before=build/before/libfa3nn_hopper.so
stamp bench
gpu_fp8_record 200 --headdims 128 256 --seqlens 512 1024 2048 4096 8192 16384 --reps 5
stamp cudnn
gpu_cudnn_fp8 110 --headdims 128 256 --seqlens 2048 4096 8192 16384 --iters 10 --reps 3
stamp done
gpu_archive s21d.tar.gz
