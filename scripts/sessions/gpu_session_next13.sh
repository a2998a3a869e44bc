#!/usr/bin/env bash
# Prepared at the end of the twelfth session (2026-12-02; its device time ran out), for the next session's first
# call: (1) the Triton GPU suite after the split dK/dV tile change at d256 1k-4k non-causal (configs.PINNED
# "dkdv_split", measured by a tune sweep only); (2) the d256 backward rows it moves (triton / FA2); (3) the atomic-dQ
# backward with query-major scores on 64x64/4w tiles at d64 (offline, Triton 3.6: 399 warp instructions per 1024
# scores and no spill in the loop at 64x64/4w/2, against 320 + 241 = 561 for the default two kernels (dK/dV 64x64/4w/3
# query-major + dQ 64x64/4w/3, non-causal); 5 matmuls instead of 7;
# the fifth session's key-major fused kernel measured 0.83-0.92x the default), against the default backward;
# (4) query-major 128x64/8w/2 dK/dV tiles at d128.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-next13
stamp tests
gpu_pytest tests_triton.log 100 tests/test_triton_gpu.py
stamp bench
timeout 110 python3 scripts/bench.py --backends triton fa2 --headdims 256 --directions bwd --seqlens 2048 4096 \
    --out-dir "$out" --tag next13 --precompile 12 > "$out/bench_next13.log" 2>&1
echo "bench rc $?"; grep -E "^\| 256 " "$out/next13.md"
stamp tile_ab
timeout 200 python3 scripts/triton_tile_ab.py --headdims 64 --seqlens 2048 8192 --precompile 16 --reps 3 \
    --variants pinned+row-stats pinned+row-stats+query-major+atomic-64x64x4x2 \
    pinned+row-stats+query-major+atomic-64x64x4x3 --json "$out/triton_tile_ab.json" > "$out/triton_tile_ab.log" 2>&1
echo "tile_ab rc $?"; grep -E "^\|" "$out/triton_tile_ab.log"
stamp tile_ab128
# (4) d128: query-major 128x64/8w/2 dK/dV tiles (configs.CANDIDATE_TABLES "d128-query-major") against the default
timeout 200 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 16384 --precompile 16 --reps 3 \
    --variants pinned+row-stats d128-query-major+row-stats+query-major --json "$out/triton_tile_ab128.json" \
    > "$out/triton_tile_ab128.log" 2>&1
echo "tile_ab128 rc $?"; grep -E "^\|" "$out/triton_tile_ab128.log"
stamp done
gpu_archive next13.tar.gz
