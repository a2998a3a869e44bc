#!/usr/bin/env bash
# Planned for a GPU call after the thirty-second session: the softcap forward's window tiles at head dim 128. The
# softcap windows run on the plain windows' 128 x 128 tiles (dispatch_local), and at 16k with window (4096, 0) they
# read 0.92x the Triton forward (s31h) where the uncapped windows led 1.2-1.4x: with three MUFU ops per score the
# tile that suits the uncapped windows may not suit the capped ones. Two measurement builds of bwd-softcap fee0fdf
# (hopper_build --define FA3NN_FWD_LOCAL_VARIANT=0: every window on Tiles<D, 0>, d128 128 x 176; =5: d128 128 x 160),
# carried as build/window_tiles.tar.xz, against the default 128 x 128 in one run, cap 30. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s33d
stamp start
mkdir -p /tmp/window_tiles && tar xJf build/window_tiles.tar.xz -C /tmp/window_tiles
timeout 240 python scripts/window_ab.py --headdims 128 --directions fwd --flex-headdims --softcap 30 \
    --compare w176=/tmp/window_tiles/w0/libfa3nn_hopper.so --compare w160=/tmp/window_tiles/w5/libfa3nn_hopper.so \
    --json "$out/softcap_window_tiles.json" > "$out/softcap_window_tiles.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap_window_tiles.log"
grep -E "Error" "$out/softcap_window_tiles.log" | head -n 3
stamp done
