#!/usr/bin/env bash
# 2026-12-03 (seventeenth session): does a dK/dV program's fixed cost (K/V load, dK/dV store, pipeline fill) bound
# the short d256 backward? The Triton key-block programs walk the `group` query heads of one K/V head after one K/V
# load, so GQA at the same query heads and FLOPs gives each program group x the steps: if the 512 / 1k rows run
# much faster per FLOP with group 2 / 4, chaining several tiles per program (a flat loop over (tile, step)) is worth
# building for MHA. One stream, so each kernel's time is its own (scripts/bwd_breakdown.py --groups).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s17b
stamp breakdown
FA3NN_TRITON_BWD_STREAMS=0 timeout 300 python scripts/bwd_breakdown.py --headdims 256 --seqlens 512 1024 4096 \
    --groups 1 2 4 --backends triton --json "$out/gqa256.json" > "$out/gqa256.log" 2>&1
echo "rc $?"; grep "^| triton" "$out/gqa256.log" | cut -c1-260
FA3NN_TRITON_BWD_STREAMS=0 timeout 120 python scripts/bwd_breakdown.py --headdims 128 --seqlens 512 \
    --groups 1 2 --backends triton --json "$out/gqa128.json" > "$out/gqa128.log" 2>&1
echo "rc $?"; grep "^| triton" "$out/gqa128.log" | cut -c1-260
stamp done
gpu_archive s17b.tar.gz
