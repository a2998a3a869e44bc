#!/usr/bin/env bash
# 2026-12-02 (thirteenth session): the output-split backward (configs "dv" + "dk" kernels, FA3NN_TRITON_DKDV_OUTPUTS)
# at d128 against the one dK/dV kernel: (1) triton_tile_ab at 2048 / 8192 / 16384, causal and not, with the split's
# first-guess tiles in both orientations, and the dQ kernel on a second stream (+streams) with and without the
# split; at d256 the split against the head-dim split; (2) the GPU tests of both.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-outsplit
stamp tile_ab
timeout 270 python3 scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 16384 --precompile 16 --reps 3 \
    --variants pinned+row-stats pinned+row-stats+output-split+key-major \
    pinned+row-stats+output-split+key-major+dv-64x128x8x1+dk-64x128x8x1 \
    pinned+row-stats+output-split+query-major+dv-128x128x8x2+dk-128x64x8x2 \
    pinned+row-stats+streams pinned+row-stats+output-split+key-major+streams \
    --json "$out/triton_tile_ab.json" > "$out/triton_tile_ab.log" 2>&1
echo "tile_ab rc $?"; grep -E "^\|" "$out/triton_tile_ab.log"
stamp tile_ab256
# d256: the output split (5 matmul-equivalents per key and query block, offline 298 + 445 warp instructions per
# 1024 scores on 64x128/8w/1) against the default head-dim split (6; 2 x 552)
timeout 120 python3 scripts/triton_tile_ab.py --headdims 256 --seqlens 2048 8192 --precompile 16 --reps 3 \
    --variants pinned+row-stats+split-d pinned+row-stats+output-split+key-major \
    --json "$out/triton_tile_ab256.json" > "$out/triton_tile_ab256.log" 2>&1
echo "tile_ab256 rc $?"; grep -E "^\|" "$out/triton_tile_ab256.log"
stamp tests
gpu_pytest tests_split.log 150 tests/test_triton_gpu.py -k "output_split or second_stream"
stamp done
gpu_archive outsplit.tar.gz
