#!/usr/bin/env bash
# Forty-eighth session, second call: the FP8 backward's Q and K restored in one Triton pass (fa3nn.fp8.backward.restore:
# dequantized with the rotation undone on the e4m3 reads, so dQ / dK need no rotation back; s48a timed the s47 form's
# pieces at 0.34 ms (Triton dequantization) + 0.38 ms (rotations back) at 16k tokens) and the FP8-inputs caller fix
# (s48a: 8 GPU tests raised TypeError). Library build/final47/ (main's kernels, C ABI 7) in build/s47d.tar.xz.
# 1. The FP8 GPU tests. 2. fp8_train_step (GPU and host time per variant; one profile). 3. fp8_grad_accuracy on the
# kernels. 4. On an H200 only: the uniform-varlen backward rule against per tile (NOTES Next 4).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48b s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_fp8.log 200 tests/test_fp8_triton_gpu.py tests/test_hopper_fp8.py tests/test_fa3_compat.py \
    tests/test_fp8_api.py tests/test_api.py -k "fp8 or dequantize or quantized or restore"
gpu_log_summary "$out/tests_fp8.log"
stamp tests
timeout 120 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"; tail -n 3 "$out/fp8_step.log" | grep -v "^|"
timeout 60 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 --causal no --reps 2 --profile \
    > "$out/fp8_profile.log" 2>&1
echo "profile rc $?"; grep -A11 "^profile" "$out/fp8_profile.log" | cut -c1-120
stamp "fp8 step"
timeout 60 python3 scripts/fp8_grad_accuracy.py --seqlen 2048 --stds 1 4 16 --json "$out/fp8_grad.json" \
    > "$out/fp8_grad.log" 2>&1
echo "fp8 grad rc $?"; grep -E "^\| [0-9]" "$out/fp8_grad.log"
stamp "fp8 grad"
if grep -q H200 "$out/gpu_state.txt"; then
    timeout 60 python3 scripts/bwd_varlen_ab.py --headdims 128 64 --varlen-cases 2048 --schedules per_tile \
        --no-triton --rounds 3 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
    echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log" | cut -c1-220
    stamp "uniform rule"
fi
gpu_archive s48b.tgz
