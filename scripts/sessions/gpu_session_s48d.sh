#!/usr/bin/env bash
# Forty-eighth session, last call (~7 minutes of device time left, start included): s48c's stages, leanest first.
# 1. The restore pass's GPU tests (its row offsets found in the kernel; the compile test of
# FP8 training through fa3nn::restore_rows). 2. fp8_train_step at 2k. 3. The host profile (s48b: FP8 steps host-bound).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48d s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
gpu_pytest tests_fp8.log 60 tests/test_fp8_triton_gpu.py -k "dequantize or quantized or restore or compile"
gpu_log_summary "$out/tests_fp8.log"
stamp tests
timeout 40 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 --causal no --reps 3 \
    --json "$out/fp8_step.json" > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
stamp "fp8 step"
timeout 40 python3 scripts/fp8_host_profile.py --seqlen 2048 --iters 20 --top 22 > "$out/host_profile.log" 2>&1
echo "profile rc $?"; grep -A23 "^=== " "$out/host_profile.log" | cut -c1-150
stamp profile
