#!/usr/bin/env bash
# 2026-12-03 (twentieth session), sixth call: issue 5's table a second time on the same build as s20e (K/V releases
# by every consumer warp), every head dim: s20e's bf16 d256 forward read 742 TFLOP/s at 16k against s19c's 806 on
# SASS-identical code, which moves the FP8 / bf16 ratio by 8%; a second same-build run says how far one run is to
# be trusted. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s20f
export FA3NN_TRITON_AUTOTUNE=0
stamp bench
gpu_fp8_record 330 --headdims 64 128 256 --seqlens 512 1024 2048 4096 8192 16384 --reps 7
stamp done
gpu_archive s20f.tar.gz
