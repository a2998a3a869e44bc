#!/usr/bin/env bash
# 2026-12-02 eleventh session: the fused turn as the d256 FP8 default (after fused256-h200-20261202-0823). Every FP8
# GPU test, issue 5's d256 table (scripts/bench.py: end to end, kernel and quantization beside our bf16 forward and
# cuDNN bf16) and cuDNN's FP8 forward beside our defaults at d128 and d256. Carry build (libfa3nn_hopper.so), .whl.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-fused256default
stamp tests
gpu_pytest tests_fp8.log 200 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -12
stamp table
timeout 300 python3 scripts/bench.py --backends hopper-fp8 hopper cudnn --headdims 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --directions fwd --out-dir "$out" --tag fp8table > "$out/bench.log" 2>&1
echo "bench.py rc $?"; grep -E "^\|" "$out/bench.log" | tail -n 14 | cut -d'|' -f1-12,18-21
stamp cudnn
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
timeout 150 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --headdims 128 256 \
    --seqlens 2048 4096 8192 16384 --cudnn-outputs e4m3 --iters 10 --reps 5 > "$out/cudnn_fp8.log" 2>&1
echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log"
rm -rf "$out/wheels"
stamp done
