#!/usr/bin/env bash
# Forty-eighth session, third call: the restore pass with its row offsets found in the kernel (no per-row tensor
# from the host) and its +-1 matrix kept per rotation; the helper's fixes (fa3nn::restore_rows for traced backwards,
# BLOCK_D >= 16, a compile-vs-eager FP8 training test); where the FP8 step's host time goes (s48b: the host issued
# one step in 0.79 ms for bf16, 1.76 / 2.61 ms for fp8 "inputs" / "quantized", against 1.7-1.9 ms of kernels).
# Library build/final47/ (main's kernels, C ABI 7) in s47d.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48c s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_fp8.log 150 tests/test_fp8_triton_gpu.py tests/test_hopper_fp8.py tests/test_fa3_compat.py \
    tests/test_fp8_api.py -k "fp8 or dequantize or quantized or restore or compile"
gpu_log_summary "$out/tests_fp8.log"
stamp tests
timeout 70 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --reps 3 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
stamp "fp8 step"
timeout 60 python3 scripts/fp8_host_profile.py --seqlen 2048 --iters 30 --top 30 > "$out/host_profile.log" 2>&1
echo "profile rc $?"; grep -A31 "^=== " "$out/host_profile.log" | cut -c1-150
stamp profile
gpu_archive s48c.tgz
