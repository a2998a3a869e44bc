#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session): d128's FP8 default now stores O through shared memory by TMA (s25g: +5.5% at
# causal 4k, 1.05x cuDNN's FP8 there). Every FP8 GPU test on it (test_hopper_fp8.py, test_fp8_api.py), the tile-end
# turn traced, and issue 5's rows: cuDNN's FP8 beside the default at d128 / d256, causal and not, 4k-16k (11 reps),
# and bench.py --rounds 5 (FP8 kernel, our bf16) at 16k. Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25h
stamp tests
gpu_pytest tests_fp8.log 260 tests/test_hopper_fp8.py tests/test_fp8_api.py
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp trace
timeout 60 build/fp8_trace 4096 1 0 1 2>&1 | grep -E "TFLOP/s|fit over|tile-end turn" | tee "$out/trace.log"
stamp cudnn
gpu_cudnn_fp8 150 --headdims 128 256 --seqlens 4096 8192 16384 --iters 10 --reps 11
stamp bench
timeout 150 python scripts/bench.py --backends hopper-fp8 hopper --directions fwd --iters 5 --rotate 2 --reps 5 \
    --rounds 5 --out-dir "$out" --tag fp8rounds --headdims 128 256 --seqlens 16384 --causal no > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/fp8rounds.md | head -8
stamp done
