#!/usr/bin/env bash
# 2026-12-03 (twentieth session), fifth call, on the K/V releases by every consumer warp (s20d: FP8 tests 262
# passed; the same-call A/B read +4..+13% at 16k, within +-2% elsewhere). (1) The A/B again at 4k-16k, 8 rounds,
# every head dim. (2) Issue 5's table from this code: bench.py FP8 rows beside our bf16 forward and cuDNN (d128,
# d256, 512-16k). (3) cuDNN's FP8 forward beside ours. Carry build and .whl (cudnn-frontend).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20e
export FA3NN_TRITON_AUTOTUNE=0
stamp ab
gpu_fp8_bench ab 200 --headdims 64 128 256 --seqlens 4096 8192 16384 --block-k 256 --reps 8 \
    --variants --compare before=build/before/libfa3nn_hopper.so
stamp bench
gpu_fp8_record 200 --headdims 128 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --reps 5
stamp cudnn
gpu_cudnn_fp8 110 --headdims 128 256 --seqlens 2048 4096 8192 16384 --iters 10 --reps 3
stamp done
gpu_archive s20e.tar.gz
