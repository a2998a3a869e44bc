#!/usr/bin/env bash
# 2026-12-03 (twentieth session), sixth call: issue 5's table a second time on the same build as s20e (K/V releases
# by every consumer warp), every head dim: s20e's bf16 d256 forward read 742 TFLOP/s at 16k against s19c's 806 on
# SASS-identical code, which moves the FP8 / bf16 ratio by 8%; a second same-build run says how far one run is to
# be trusted. Carry build.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s20f
export FA3NN_TRITON_AUTOTUNE=0
stamp bench
timeout 330 python scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 64 128 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --iters 5 --reps 7 --rotate 2 --out-dir "$out" \
    --tag fp8record > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out"/*fp8record*.md | cut -d'|' -f2-6,11,14,18-21
stamp done
gpu_archive s20f.tar.gz
