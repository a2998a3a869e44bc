#!/usr/bin/env bash
# 2026-12-02 (fifteenth session): the d256 causal forward at 512 / 1k (1.14 / 1.28x FA2 in final15, the last forward
# row short of 1.2x) on tiles that let two CTAs share an SM (offline, Triton 3.6, batched views: 64x64/4w/1 249
# registers x 128 threads, 64 KB, 463 warp instructions per 1024 scores; 64x32/4w/2 203 registers, 96 KB, 762)
# against the pinned 128x64/8w (one CTA per SM: 229 registers x 256 threads, 192 KB, 473).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fwd256
stamp ab
timeout 150 python3 scripts/triton_tile_ab.py --direction fwd --precompile 16 --reps 5 --headdims 256 \
    --seqlens 512 1024 2048 --variants pinned pinned+fwd-64x64x4x1 pinned+fwd-64x32x4x2 pinned+fwd-64x32x4x1 \
    --json "$out/ab256f2.json" > "$out/ab256f2.log" 2>&1
echo "ab256f2 rc $?"; grep -E "^\| pinned" "$out/ab256f2.log" | cut -d'|' -f2-5,8-10
stamp done
gpu_archive fwd256.tar.gz
