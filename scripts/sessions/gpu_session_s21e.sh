#!/usr/bin/env bash
# 2026-12-03 (twenty-first session), after s21d: the FP8 GPU tests again with the rounded-sum lse bound, and a second
# run of issue 5's bench.py table and cuDNN's FP8 on the same build. Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s21e
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp bench
gpu_fp8_record 200 --headdims 128 256 --seqlens 512 1024 2048 4096 8192 16384 --reps 5
stamp cudnn
gpu_cudnn_fp8 110 --headdims 128 256 --seqlens 2048 4096 8192 16384 --iters 10 --reps 3
stamp done
gpu_archive s21e.tar.gz
