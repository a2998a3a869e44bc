#!/usr/bin/env bash
# One device call (2026-12-02 twelfth session): the Triton backward with its Q/dO (dK/dV kernel) and K/V (dQ kernel) tiles through tensor
# descriptors against the default (scripts/triton_tile_ab.py; its compiles warm the cache for what follows), then where the
# backward's time goes kernel by kernel beside cuDNN's (scripts/bwd_breakdown.py), then the Triton GPU suite with both switched on.
#   bash scripts/sessions/gpu_session_tritontma.sh
source scripts/gpu_env.sh
gpu_setup /tmp/tritontma
stamp tile_ab
timeout 330 python3 scripts/triton_tile_ab.py --headdims 64 128 --seqlens 1024 4096 16384 --precompile 16 --reps 3 \
    --variants pinned+row-stats pinned+row-stats+dkdv-tma pinned+row-stats+dq-tma pinned+row-stats+dkdv-tma+dq-tma \
    --json "$out/triton_tile_ab.json" > "$out/triton_tile_ab.log" 2>&1
echo "tile_ab rc $?"
stamp breakdown
timeout 150 python3 scripts/bwd_breakdown.py --headdims 64 128 --seqlens 2048 8192 --json "$out/bwd_breakdown.json" \
    > "$out/bwd_breakdown.log" 2>&1
echo "breakdown rc $?"
stamp tests
FA3NN_TRITON_DKDV_TMA=1 FA3NN_TRITON_DQ_TMA=1 gpu_pytest triton_gpu_tma.log 90 tests/test_triton_gpu.py
stamp done
tail -n 30 "$out/bwd_breakdown.log" | cut -c1-400
grep -E "^\|" "$out/triton_tile_ab.log"
