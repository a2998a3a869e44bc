#!/usr/bin/env bash
# 2026-12-03 (eighteenth session), second call. (1) The Triton FP8 GPU tests on the final tiles (d64's default changed
# to 128x64/4w/3 after s18a's tests). (2) Triton FP8 tile sweeps that were never timed: 4-warp 64x64 tiles (0 spills
# offline at d128, 56 KB: two CTAs per SM, as the bf16 d128 forward's default) against the table's tiles, d128 and d64,
# 2k / 16k, causal and not. (3) Issue 5's table from the final code: bench.py FP8 rows (native and Triton, end to end,
# kernel, quantization) beside our bf16 Hopper forward and cuDNN, d128 / d256; cuDNN's FP8 forward beside ours.
# Carry build (libfa3nn_hopper.so of this tree) and .whl (cudnn-frontend 1.32).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18b
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8_triton.log 120 tests/test_fp8_triton_gpu.py
grep -E "^(FAILED|ERROR)" "$out/tests_fp8_triton.log" | head -n 10
stamp sweep
timeout 130 python scripts/fp8_triton_ab.py --headdims 128 --seqlens 2048 16384 \
    --tiles 128x128x8x3 64x128x4x3 64x64x4x3 64x64x4x4 64x64x4x2 --json "$out/sweep128.json" > "$out/sweep128.log" 2>&1
echo "sweep128 rc $?"; sed -n '/^| d /,$p' "$out/sweep128.log" | cut -d'|' -f2-5,7
timeout 90 python scripts/fp8_triton_ab.py --headdims 64 --seqlens 2048 16384 \
    --tiles 128x64x4x3 64x128x4x3 64x64x4x3 64x64x4x2 --json "$out/sweep64.json" > "$out/sweep64.log" 2>&1
echo "sweep64 rc $?"; sed -n '/^| d /,$p' "$out/sweep64.log" | cut -d'|' -f2-5,7
stamp bench
timeout 200 python scripts/bench.py --backends hopper-fp8 triton-fp8 hopper cudnn --headdims 128 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --iters 5 --reps 5 --rotate 2 --out-dir "$out" \
    --tag fp8record > "$out/bench.log" 2>&1
echo "bench rc $?"
stamp cudnn
gpu_cudnn_fp8 110 --headdims 128 256 --seqlens 2048 4096 8192 16384 --iters 10 --reps 3
stamp done
gpu_archive s18b.tar.gz
