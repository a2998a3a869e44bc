#!/usr/bin/env bash
# Forty-seventh session, last call (~9 minutes of device time left): main with the FP8 backward's Triton
# dequantization (fa3nn.backends.triton.dequantize) and the FP8 varlen forward's dynamic deal (merged from
# wip-fp8-dyn), library build/final47/ (main's kernels, C ABI 7) in build/s47d.tar.xz. 1. The FP8
# backward's GPU tests (the dequantize kernel bitwise against PyTorch; the kernel paths' gradients from the quantized
# operands, the 'triton' cases now against the Triton backward, deterministic). 2. fp8_train_step.py: in s47c the
# backward's extras took 0.95 ms at 16k tokens (fp8 quantized 0.55x bf16 at 2k), each piece timed alone now.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s47d s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_fp8.log 120 tests/test_fp8_triton_gpu.py tests/test_hopper_fp8.py \
    -k "quantized_operands or dequantize_kernel or train or varlen_deal"
gpu_log_summary "$out/tests_fp8.log"
stamp tests
timeout 90 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"; tail -n 2 "$out/fp8_step.log"
stamp "fp8 step"
gpu_archive s47d.tgz
