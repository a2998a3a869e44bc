#!/usr/bin/env bash
# 2026-12-02 (fifteenth session): the d256 backward with the atomic dQ on the output split ("dk_dq": the dK kernel
# adds dQ by TMA reduce-adds; 6 matmuls per key and query block instead of 8, no dQ kernel). bd256 (same day,
# one stream, 8k non-causal): dV kernel 2265 us, dK 3722, dQ 3674. Offline (Triton 3.6) the dk_dq kernel on
# 64x128/8w/1 issues 649 warp instructions per 1024 scores (17 spill instructions in the loop; causal 704 / 99)
# against dK + dQ's 445 + 518 = 963; 32x128/8w/1 976, no spill in the loop, 224 KB. Gradients checked against the
# default's (2e-2: atomics change the summation order), then the atomic GPU test.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-dkdq
stamp ab
timeout 200 python3 scripts/triton_tile_ab.py --precompile 16 --reps 3 --headdims 256 --seqlens 512 2048 8192 \
    --variants pinned+row-stats pinned+row-stats+atomic+dk_dq-64x128x8x1 pinned+row-stats+atomic+dk_dq-32x128x8x1 \
    pinned+row-stats+atomic --json "$out/dkdq.json" > "$out/dkdq.log" 2>&1
echo "dkdq rc $?"; grep -E "^\| pinned" "$out/dkdq.log" | cut -d'|' -f2-5,8-10
stamp tests
gpu_pytest tests_atomic.log 150 tests/test_triton_gpu.py -k "atomic_dq_path"
stamp done
gpu_archive dkdq.tar.gz
