#!/usr/bin/env bash
# 2026-12-01 (third session): SM clock, power and throttle reasons while each kernel runs back to back
# (scripts/clock_probe.py), to tell a power-limited kernel from a schedule-limited one. The FP8 d128 softmax measured
# 4-12% slower with a quarter of its exp2s on the FP32 pipe (NOTES "The polynomial exp2 on the 192-key kernel"),
# which fits either a latency chain or a power budget; the FP8 matmul ceiling (1272 TFLOP/s) is below the datasheet
# rate at boost clock, which points at power. Carry build/libfa3nn_hopper.so and .whl/ (cudnn-frontend).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-clocks
gpu_wheels /tmp/fa3nn-site "nvidia_cudnn_frontend-*.whl"
stamp d128
timeout 150 python3 scripts/clock_probe.py --json "$out/d128.json" --headdim 128 > "$out/d128.log" 2>&1
echo "d128 rc $?"; sed -n '/^| kernel/,$p' "$out/d128.log"
stamp d256
timeout 100 python3 scripts/clock_probe.py --json "$out/d256.json" --headdim 256 \
    --kernels bf16 cudnn fp8 cudnn_fp8 > "$out/d256.log" 2>&1
echo "d256 rc $?"; sed -n '/^| kernel/,$p' "$out/d256.log"
stamp d64
timeout 60 python3 scripts/clock_probe.py --json "$out/d64.json" --headdim 64 --kernels bf16 cudnn > "$out/d64.log" 2>&1
echo "d64 rc $?"; sed -n '/^| kernel/,$p' "$out/d64.log"
stamp done
gpu_archive clocks.tgz
