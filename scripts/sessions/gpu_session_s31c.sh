#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, third call): the window A/B again, whole (s31b's stopped at its first FlexAttention
# backward: retain_graph against donated buffers, fixed), with d64's window forward on the 192 x 128 tiles (3
# consumers; build/d64wide.so, FA3NN_FWD_LOCAL_D64_WIDE) beside the 128 x 128 default (s31b: 0.96-1.06x Triton at d64);
# then every GPU test with 8 workers (s31b's 12 ran 86 tests out of memory; 40 rerun alone passed) and every failure
# rerun alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31c
stamp start
timeout 280 python scripts/window_ab.py --headdims 64 128 256 --flex-headdims 128 --rounds 5 \
    --compare d64wide="$PWD/build/d64wide.so" --json "$out/window_ab.json" > "$out/window_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/window_ab.log"; grep -E "Error" "$out/window_ab.log" | head -n 3
stamp ab
TEST_WORKERS=8 RERUN_MAX=150 gpu_all_tests 230 70
stamp done
