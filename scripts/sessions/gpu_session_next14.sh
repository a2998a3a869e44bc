#!/usr/bin/env bash
# Prepared at the end of the thirteenth session (2026-12-02; its device time ran out), for the next session's first
# call: (1) d256 dV kernel on 64x128/8w/2 (the tile sweeps of results/o3-, o4-h200-20261202-1536/1537 read +4-9%
# non-causal over the pinned 64x128/8w/1, after the table of record) against the default, gradients checked;
# (2) d128 non-causal dK/dV on 64x64/4w/1 with Q / dO through descriptors (CANDIDATE_TABLES "d128-4w-tma": two CTAs
# per SM instead of one CTA of two warpgroups in lockstep) against the default; (3) the Triton GPU suite.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-next14
stamp ab256
timeout 150 python3 scripts/triton_tile_ab.py --headdims 256 --seqlens 2048 8192 16384 --precompile 16 --reps 3 \
    --variants pinned+row-stats pinned+row-stats+dv-64x128x8x2 --json "$out/ab256.json" > "$out/ab256.log" 2>&1
echo "ab256 rc $?"; grep -E "^\|" "$out/ab256.log"
stamp ab128
timeout 150 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 16384 --causal no --precompile 16 \
    --reps 3 --variants pinned+row-stats d128-4w-tma+row-stats+dkdv-tma+key-major \
    --json "$out/ab128.json" > "$out/ab128.log" 2>&1
echo "ab128 rc $?"; grep -E "^\|" "$out/ab128.log"
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
stamp done
gpu_archive next14.tar.gz
