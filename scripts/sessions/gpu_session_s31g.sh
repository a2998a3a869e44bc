#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, seventh call): the window forward's tiles. The final library (d64 128 x 128 up to
# 2048-key windows then 192 x 128, d128 128 x 128, d256 128 x 80) against builds with every window on Tiles<D, 0>
# (d64 192 x 128, d128 128 x 176, d256 128 x 80) and on Tiles<D, 5> (d64 192 x 128 3 stages, d128 128 x 160 2 Q,
# d256 128 x 48 2 Q): FA3NN_FWD_LOCAL_VARIANT=0 / 5 (build/lv0.so, build/lv5.so). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31g
stamp start
tar xJf build/extra_libs.tar.xz -C build
timeout 200 python scripts/window_ab.py --headdims 64 128 256 --directions fwd --flex-headdims \
    --compare v0="$PWD/build/lv0.so" --compare v5="$PWD/build/lv5.so" --json "$out/window_tiles.json" \
    > "$out/window_tiles.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/window_tiles.log"; grep -E "Error" "$out/window_tiles.log" | head -n 3
stamp done
