#!/usr/bin/env bash
# 2026-12-02 (fourteenth session): the library's dK/dV kernel on the probe's fast shape (CANDIDATE_TABLES "4w2-tma":
# key-major 64x64/4w/2, Q / dO through descriptors) against the default, whole backward, gradients checked, d128
# and d64 at 2k / 8k / 16k, causal and not.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-4w2
stamp ab128
timeout 200 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 16384 --precompile 16 --reps 3 \
    --variants pinned+row-stats 4w2-tma+row-stats+dkdv-tma+key-major \
    --json "$out/ab128.json" > "$out/ab128.log" 2>&1
echo "ab128 rc $?"; grep -E "^\|" "$out/ab128.log"
stamp ab64
timeout 150 python3 scripts/triton_tile_ab.py --headdims 64 --seqlens 2048 8192 --precompile 16 --reps 3 \
    --variants pinned+row-stats 4w2-tma+row-stats+dkdv-tma+key-major \
    --json "$out/ab64.json" > "$out/ab64.log" 2>&1
echo "ab64 rc $?"; grep -E "^\|" "$out/ab64.log"
stamp done
gpu_archive 4w2.tar.gz
