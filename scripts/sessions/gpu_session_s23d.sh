#!/usr/bin/env bash
# 2026-12-03 (twenty-third session): the recipes' fast_exp2 (variant 53: the 256-key d128 default with half its
# P8 from the linear exp2, both output dtypes) through the FP8 GPU tests, issue 5's bench.py table with a
# hopper-fp8-fast row beside hopper-fp8, our bf16 and cuDNN, and cuDNN's FP8 beside the fast kernel. Carry build
# and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s23d
export FA3NN_TRITON_AUTOTUNE=0
stamp tests
gpu_pytest tests_fp8.log 240 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp bench
timeout 240 python scripts/bench.py --backends hopper-fp8 hopper-fp8-fast hopper cudnn --directions fwd --iters 5 \
    --rotate 2 --out-dir "$out" --tag fp8record --headdims 128 --seqlens 2048 4096 8192 16384 --reps 5 \
    > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/*fp8record*.md | head -n 40
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 4096 8192 16384 --iters 10 --reps 3 --variant fast_exp2
stamp done
