#!/usr/bin/env bash
# Forty-seventh session, third call: branch wip-fp8-dyn (main + the FP8 varlen forward's dynamic deal on the d128
# 256-key cross-tile kernel, C ABI 7) carried as a source tree build/fp8dyn_src/ (git archive) with its library
# build/fp8dyn/, in build/s47c.tar.xz. 1. The FP8, native-forward and sm_margin GPU tests on that tree (the device
# time left after failed starts does not hold the whole suite) (it holds main's FP8 training fix cba1d60 too:
# the descales non-differentiable; s47a's 4 failures). 2. scripts/fp8_varlen_balance.py at d128 (dynamic x static,
# 2048 / mixed / short, causal and not). 3. scripts/fp8_train_step.py (failed in s47b on the descales' gradient).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s47c s47c.tar.xz
root=$PWD
cd build/fp8dyn_src
export FA3NN_HOPPER_LIB=$root/build/fp8dyn/libfa3nn_hopper.so PYTHONPATH=$PWD
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_fp8.log 240 tests/test_hopper_fp8.py tests/test_fp8_triton_gpu.py tests/test_fp8_api.py \
    tests/test_hopper.py tests/test_sm_margin.py
gpu_log_summary "$out/tests_fp8.log"
stamp tests
timeout 60 python3 scripts/fp8_varlen_balance.py --headdims 128 --cases 2048 mixed short --rounds 3 \
    --json "$out/fp8_balance.json" > "$out/fp8_balance.log" 2>&1
echo "fp8 balance rc $?"; grep -E "^\| [0-9]" "$out/fp8_balance.log"; tail -n 2 "$out/fp8_balance.log"
stamp balance
timeout 60 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"; tail -n 2 "$out/fp8_step.log"
stamp "fp8 step"
cd "$root"
gpu_archive s47c.tgz
