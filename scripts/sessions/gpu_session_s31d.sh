#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, fourth call): the final window library (d64 windows spanning more than 2048 keys
# on the 192 x 128 tiles, the rest on 128 x 128: flash_fwd_launch.cuh, dispatch_local): every window test (forward
# dense and varlen, backward, the auto path), then d64's forward at lefts 1024 / 2048 / 4096 against the all-wide
# build (build/d64wide.so) to place the threshold. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31d
stamp start
gpu_pytest window_tests.log 200 tests/test_hopper.py tests/test_hopper_bwd.py -k "window or sliding"
grep -E "^(FAILED|ERROR) " "$out/window_tests.log" | head -n 10
stamp tests
timeout 150 python scripts/window_ab.py --headdims 64 --directions fwd --flex-headdims --lefts 1024 2048 4096 \
    --compare d64wide="$PWD/build/d64wide.so" --json "$out/window_ab_d64.json" > "$out/window_ab_d64.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/window_ab_d64.log"; grep -E "Error" "$out/window_ab_d64.log" | head -n 3
stamp done
