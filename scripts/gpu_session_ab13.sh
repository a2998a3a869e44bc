#!/usr/bin/env bash
# 2026-12-02 (thirteenth session), with the session's last ~270 s of device time: the two A/Bs of next14 only (the
# d256 dV kernel on 64x128/8w/2 non-causal, the d128 non-causal "d128-4w-tma" candidate), short limits; the suite
# and any adoption stay for the next session.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-ab13
stamp ab128
timeout 80 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 16384 --causal no --precompile 16 \
    --reps 3 --variants pinned+row-stats d128-4w-tma+row-stats+dkdv-tma+key-major \
    --json "$out/ab128.json" > "$out/ab128.log" 2>&1
echo "ab128 rc $?"; grep -E "^\| (pinned|d128)" "$out/ab128.log" | cut -d'|' -f2-10
stamp ab256
timeout 80 python3 scripts/triton_tile_ab.py --headdims 256 --seqlens 2048 16384 --causal no --precompile 16 \
    --reps 3 --variants pinned+row-stats pinned+row-stats+dv-64x128x8x2 --json "$out/ab256.json" > "$out/ab256.log" 2>&1
echo "ab256 rc $?"; grep -E "^\| pinned" "$out/ab256.log" | cut -d'|' -f2-10
stamp done
gpu_archive ab13.tar.gz
