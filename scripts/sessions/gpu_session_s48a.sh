#!/usr/bin/env bash
# Forty-eighth session, first call: what s47d owed (no machine came for it) and the whole GPU suite on main (edd5466),
# library build/final47/ (main's kernels, C ABI 7) in build/s47d.tar.xz. 1. fp8_train_step.py with each backward
# extra timed alone (s47c: the extras took 0.95 ms at 16k tokens; fp8 "quantized" 0.55x bf16 at 2k). 2. Every GPU test
# (includes the Triton dequantization bitwise against PyTorch and the FP8 varlen deal on the merged library).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48a s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 120 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"; tail -n 4 "$out/fp8_step.log"
stamp "fp8 step"
gpu_pytest tests_all.log 400 tests/
gpu_log_summary "$out/tests_all.log"
stamp tests
gpu_archive s48a.tgz
