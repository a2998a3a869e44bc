#!/usr/bin/env bash
# 2026-12-01 (second session): the Triton backward's dQ added from the dK/dV kernel by TMA reduce-adds
# (cp.reduce.async.bulk.tensor through a descriptor, one per 64-row tile, instead of 64 red.global per thread)
# with each program's unmasked run rotated to start at its own key block: 5 matmuls instead of 7.
# (1) GPU tests of the atomic path (dense cases now take the TMA reduce) and determinism; (2) A/B of the whole
# backward (launch.backward, scripts/triton_tile_ab.py) against the shipped default (pinned tiles + row stats).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-atomicdq
stamp tests
timeout 150 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_triton_gpu.py \
    -k "atomic or determin" > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp ab128
timeout 220 python scripts/triton_tile_ab.py --headdims 128 --seqlens 2048 8192 --json "$out/ab128.json" \
    --variants pinned+row-stats pinned+row-stats+atomic-64x128x8x1 pinned+row-stats+atomic-64x128x8x2 \
    pinned+row-stats+atomic-64x64x8x2 > "$out/ab128.log" 2>&1
echo "ab128 rc $?"; sed -n '/^| variant/,$p' "$out/ab128.log"
stamp ab64
timeout 180 python scripts/triton_tile_ab.py --headdims 64 --seqlens 2048 8192 --json "$out/ab64.json" \
    --variants pinned+row-stats pinned+row-stats+atomic-64x128x8x2 pinned+row-stats+atomic-32x128x8x3 \
    pinned+row-stats+atomic-64x64x8x2 > "$out/ab64.log" 2>&1
echo "ab64 rc $?"; sed -n '/^| variant/,$p' "$out/ab64.log"
stamp done
gpu_archive atomicdq.tgz
