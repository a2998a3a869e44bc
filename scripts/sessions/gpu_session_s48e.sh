#!/usr/bin/env bash
# Forty-eighth session, with the last ~4 minutes of device time: fp8_train_step at 2k non-causal on main's final code
# (eager FP8 calls off the custom-op dispatcher, the launchers' host-side next_power_of_2; s48d on the code before them:
# fp8 quantized 2.212 ms / host 2.128, inputs 1.968 / 1.759, bf16 1.823 / 0.711). Library build/final47/.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s48e s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 --causal no --reps 3 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
stamp "fp8 step"
